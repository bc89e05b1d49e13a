package llamarunner

import "testing"

func TestCtxSeqs(t *testing.T) {
	for _, tc := range []struct{ seqs, batch, want int }{
		{1, 256, 1},
		{2, 256, 2},
		{3, 256, 4}, // the app's chat context
		{3, 512, 4},
		{3, 384, 3}, // already a divisor
		{5, 256, 8},
		{3, 3, 3},
		{7, 4, 7},   // more sequences than tokens a call: left as asked
		{3, 254, 3}, // no divisor up to six: left as asked, not 127
		{3, 514, 3}, // not 257, past llama.cpp's limit of 256 sequences
	} {
		if got := ctxSeqs(tc.seqs, tc.batch); got != tc.want {
			t.Errorf("ctxSeqs(%d, %d) = %d, want %d", tc.seqs, tc.batch, got, tc.want)
		}
	}
}
