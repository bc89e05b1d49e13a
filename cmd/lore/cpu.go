package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"lore/engine/cpu"
)

// cpuCmd shows which runner build suits this CPU and which one models use.
func cpuCmd(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("cpu", flag.ContinueOnError)
	best := fs.Bool("best", false, "print only the variant to build for this CPU (used by the Makefile)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st := cpu.Describe()
	switch {
	case *best:
		fmt.Println(st.Best)
		return nil
	case *asJSON:
		return printJSON(st)
	}
	fmt.Printf("features: %s\n\n", st.Features)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "VARIANT\tSUPPORTED\tINSTALLED\tABOUT")
	for _, v := range st.Variants {
		about := v.About
		if v.OptIn {
			about = "(opt-in: LORE_CPU_VARIANT=" + v.Name + ") " + about
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", v.Name, yes(v.Supported), yes(v.Installed), about)
	}
	w.Flush()
	if st.Error != "" {
		return fmt.Errorf("%s", st.Error)
	}
	fmt.Printf("\nmodels run with %s (%s)\n", st.Runner, st.Variant)
	return nil
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}
