package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"lore/store"
)

func TestBaseline(t *testing.T) {
	ctx := context.Background()
	b, err := store.NewBaseline(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	docs := map[string]string{
		"garden.md": "The garden is watered at dawn. " + strings.Repeat("Tomatoes and beans grow by the fence. ", 60),
		"market.md": "The river market opens at eight on Saturdays and sells fish.",
		"budget.md": "Household budget: rent, food, and the garden hose.",
	}
	for _, name := range []string{"budget.md", "garden.md", "market.md"} {
		if err := b.Add(ctx, name, docs[name]); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"when does the market open", []string{"market.md", "garden.md", "budget.md"}},
		{"watering the gardens", []string{"garden.md", "budget.md", "market.md"}}, // porter stems; "the" counts too
		{"", nil},
		{`"quoted" OR NEAR(x*`, nil}, // words only, never FTS5 syntax
	} {
		got, err := b.Search(ctx, c.q, 50)
		if err != nil {
			t.Fatalf("%q: %v", c.q, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.q, got, c.want)
		}
	}
}
