package engine

// SetStateInline makes m move KV states inline in the protocol instead of
// through a temporary file (for TestMeasure's comparison).
func SetStateInline(m *Model, on bool) { m.stateInline = on }
