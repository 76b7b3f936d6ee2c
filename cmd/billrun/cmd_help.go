package main

import (
	"context"
	_ "embed"
	"fmt"
)

// faultsHelp is `billrun help faults`: the simulator's and the store fault
// injector's own documentation of their specs (stripesim, faultstore), copied
// from their doc comments by TestHelpFaultsMatchesTheDocs (go generate
// refreshes it; the test fails when they drift), so each grammar has one
// source of truth.
//
//go:generate go test -run TestHelpFaultsMatchesTheDocs -update .
//go:embed faults_help.txt
var faultsHelp string

func helpCommand() command {
	return command{name: "help", summary: "help on a command (billrun help CMD) or on fault injection (billrun help faults)", run: runHelp}
}

func runHelp(ctx context.Context, env *cliEnv, args []string) error {
	if len(args) != 1 {
		fmt.Fprintln(env.stderr, "Usage: billrun help COMMAND | billrun help faults")
		return errUsage
	}
	if args[0] == "faults" {
		fmt.Fprint(env.stdout, faultsHelp)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] && c.name != "help" {
			return c.run(ctx, &cliEnv{stdout: env.stdout, stderr: env.stdout, getenv: env.getenv}, []string{"--help"})
		}
	}
	fmt.Fprintf(env.stderr, "billrun help: no command %q\n", args[0])
	return errUsage
}
