package llamarunner

// AMX kernels: see the package's comment.
import _ "lore/engine/llamarunner/amx"
