package vector

import (
	"context"
	"fmt"
	"testing"
)

// go test ./index/vector -run '^$' -bench . -benchtime 2000x  (about 20 s)

func BenchmarkDot(b *testing.B) {
	for _, dim := range []int{128, 384, 768} {
		b.Run(fmt.Sprint(dim), func(b *testing.B) {
			v := Clustered(2, dim, 1)
			for name, f := range map[string]func(a, b []float32) float32{"Dot": Dot, "go": dotGo} {
				b.Run(name, func(b *testing.B) {
					var s float32
					b.SetBytes(int64(8 * dim))
					for b.Loop() {
						s += f(v[0], v[1])
					}
					_ = s
				})
			}
		})
	}
}

func BenchmarkSearch(b *testing.B) {
	const n, dim = 5000, 384
	ids, vecs, queries := testData(n, dim, 100, 1)
	e, _ := NewExact(dim)
	for i, v := range vecs {
		e.Add(ids[i], v)
	}
	h, _ := NewHNSW(dim, Options{})
	if err := h.AddBatch(context.Background(), ids, vecs); err != nil {
		b.Fatal(err)
	}
	for name, x := range map[string]Index{"exact": e, "hnsw": h} {
		b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				x.Search(queries[i%len(queries)], 10)
				i++
			}
		})
	}
}

func BenchmarkAdd(b *testing.B) {
	const dim = 384
	_, vecs, _ := testData(20000, dim, 0, 1)
	h, _ := NewHNSW(dim, Options{Workers: 1})
	i := 0
	for b.Loop() {
		h.Add(int64(i), vecs[i%len(vecs)])
		i++
	}
}
