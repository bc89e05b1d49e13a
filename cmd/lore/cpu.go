package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"lore/app"
)

// cpuCmd shows which runner build suits this CPU and which one models use.
func cpuCmd(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("cpu", flag.ContinueOnError)
	best := fs.Bool("best", false, "print only the variant to build for this CPU (used by the Makefile)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st := app.DescribeCPU()
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

// modelsCmd lists the model files found, the ones in use and the runner
// build they run on.
func modelsCmd(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "fetch" {
		return fetchCmd(ctx, args[1:])
	}
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	var f appFlags
	f.register(fs)
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	a, err := f.open(ctx, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	files, err := a.Models(ctx)
	if err != nil {
		return err
	}
	sys := a.System()
	if f.json {
		return printJSON(map[string]any{"models": files, "system": sys})
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSOURCE\tKIND\tARCH\tQUANT\tSIZE MB\tCONTEXT\tRAM MB\tFITS\tPATH")
	for _, m := range files {
		if m.Error != "" {
			fmt.Fprintf(w, "%s\t%s\t-\t-\t-\t-\t-\t-\t-\t%s (%s)\n", m.Name, m.Source, m.Path, m.Error)
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", m.Name, m.Source, m.Kind, m.Architecture, m.Quantization,
			m.Size>>20, m.ContextLength, m.RAMEstimate>>20, yes(m.FitsInRAM), m.Path)
	}
	w.Flush()
	if sys.CPU.Error != "" {
		return fmt.Errorf("%s", sys.CPU.Error)
	}
	fmt.Printf("\nrunner: %s (%s build; best for this CPU: %s)\n", sys.CPU.Runner, sys.CPU.Variant, sys.CPU.Best)
	for _, m := range sys.Loaded {
		fmt.Printf("%s model: %s on %s\n", m.Role, m.Path, m.CPUVariant)
	}
	return nil
}
