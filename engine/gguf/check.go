package gguf

import "fmt"

// Limits llama.cpp enforces with assertions (llama-hparams.h) rather than errors.
const (
	llamaMaxLayers  = 512
	llamaMaxExperts = 512
)

// checkLlama rejects metadata that parses as GGUF but makes llama.cpp abort the
// process (GGML_ASSERT) or read out of bounds while loading, instead of failing
// with an error. Each case below names what llama.cpp does with it.
func checkLlama(f *File) error {
	bad := func(format string, args ...any) error {
		return &Error{Kind: ErrInvalid, Offset: -1, Msg: fmt.Sprintf(format, args...)}
	}

	// llama-vocab.cpp: tokens are read with gguf_get_arr_str (asserts a string
	// array); scores and token types are read as raw float/int arrays indexed by
	// token id; and a repeated token trips an assertion on the id map size.
	if kv, ok := f.Value("tokenizer.ggml.tokens"); ok {
		tokens, ok := kv.Value.([]string)
		if !ok {
			return bad("tokenizer.ggml.tokens is %s, want an array of strings", describe(kv.Value))
		}
		if kv, ok := f.Value("tokenizer.ggml.scores"); ok {
			s, ok := kv.Value.([]float32)
			if !ok {
				return bad("tokenizer.ggml.scores is %s, want an array of float32", describe(kv.Value))
			}
			if len(s) != len(tokens) {
				return bad("tokenizer.ggml.scores has %d entries for %d tokens", len(s), len(tokens))
			}
		}
		if kv, ok := f.Value("tokenizer.ggml.token_type"); ok {
			var n int
			switch v := kv.Value.(type) {
			case []int32:
				n = len(v)
			case []uint32:
				n = len(v)
			default:
				return bad("tokenizer.ggml.token_type is %s, want an array of int32", describe(kv.Value))
			}
			if n != len(tokens) {
				return bad("tokenizer.ggml.token_type has %d entries for %d tokens", n, len(tokens))
			}
		}
		seen := make(map[string]int, len(tokens))
		for i, t := range tokens {
			if t == "" { // llama.cpp renames empty tokens this way
				t = fmt.Sprintf("[EMPTY_%d]", i)
			}
			if j, dup := seen[t]; dup {
				return bad("tokenizer.ggml.tokens repeats %s (ids %d and %d)", short(t), j, i)
			}
			seen[t] = i
		}
	}
	if kv, ok := f.Value("tokenizer.ggml.merges"); ok {
		if _, ok := kv.Value.([]string); !ok {
			return bad("tokenizer.ggml.merges is %s, want an array of strings", describe(kv.Value))
		}
	}

	arch, _ := f.String("general.architecture")
	if arch == "" {
		return nil
	}
	// llama-model-loader.cpp get_arr/get_key_or_arr: per-layer arrays must hold
	// 32-bit integers, else an assertion fires.
	for _, k := range []string{"attention.head_count", "attention.head_count_kv", "feed_forward_length"} {
		kv, ok := f.Value(arch + "." + k)
		if !ok || kv.Type() != TypeArray {
			continue
		}
		switch v := kv.Value.(type) {
		case []int32, []uint32:
		default:
			return bad("%s.%s is %s, want an integer or an array of int32", arch, k, describe(v))
		}
	}
	if arch != "clip" { // llama.cpp reads no hyperparameters for CLIP projectors
		if err := checkExperts(f, arch); err != nil {
			return err
		}
	}
	if n, ok := f.Uint(arch + ".block_count"); ok && n > llamaMaxLayers {
		return bad("%s.block_count %d exceeds llama.cpp's limit %d", arch, n, llamaMaxLayers)
	}
	if kv, ok := f.Value(arch + ".rope.scaling.type"); ok {
		switch kv.Value {
		case "none", "linear", "yarn", "longrope":
		default:
			return bad("%s.rope.scaling.type is %s, want none, linear, yarn or longrope", arch, describe(kv.Value))
		}
	}
	return nil
}

// checkExperts mirrors the mixture-of-experts assertions in llama-model.cpp
// load_hparams, which run for every architecture before any of its own
// checks (absent keys read as 0):
//
//	n_expert <= LLAMA_MAX_EXPERTS
//	n_expert_used <= n_expert
//	n_expert > 0:  n_expert_used > 0, n_expert_groups < n_expert, and when
//	               n_expert_groups > 1: n_expert % n_expert_groups == 0,
//	               0 < n_group_used < n_expert_groups
//	n_expert == 0: n_expert_used == 0, n_expert_groups == 0
func checkExperts(f *File, arch string) error {
	bad := func(format string, args ...any) error {
		return &Error{Kind: ErrInvalid, Offset: -1, Msg: arch + "." + fmt.Sprintf(format, args...)}
	}
	// A value of the wrong type makes llama.cpp throw, not abort; reading it
	// as 0 here rejects it all the same where 0 would trip an assertion.
	experts, _ := f.Uint(arch + ".expert_count")
	used, _ := f.Uint(arch + ".expert_used_count")
	groups, _ := f.Uint(arch + ".expert_group_count")
	groupUsed, _ := f.Uint(arch + ".expert_group_used_count")
	switch {
	case experts > llamaMaxExperts:
		return bad("expert_count %d exceeds llama.cpp's limit %d", experts, llamaMaxExperts)
	case used > experts:
		return bad("expert_used_count %d exceeds expert_count %d", used, experts)
	case experts == 0 && groups != 0:
		return bad("expert_group_count %d without experts", groups)
	case experts == 0:
		return nil
	case used == 0:
		return bad("expert_count %d with expert_used_count missing or 0", experts)
	case groups >= experts:
		return bad("expert_group_count %d is not below expert_count %d", groups, experts)
	case groups <= 1:
		return nil
	case experts%groups != 0:
		return bad("expert_count %d is not a multiple of expert_group_count %d", experts, groups)
	case groupUsed == 0:
		return bad("expert_group_count %d with expert_group_used_count missing or 0", groups)
	case groupUsed >= groups:
		return bad("expert_group_used_count %d is not below expert_group_count %d", groupUsed, groups)
	}
	return nil
}

// describe names a value's GGUF type for an error message, with the value
// itself when it is a short scalar.
func describe(v any) string {
	t, elem := typeOf(v)
	switch t {
	case TypeArray:
		return "an array of " + elem.String()
	case TypeString:
		return "the string " + short(v.(string))
	}
	return fmt.Sprintf("%s %v", t, v)
}
