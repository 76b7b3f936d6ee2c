// Command billrun is the operator's tool: it runs billing periods locally or on
// Google Cloud, serves the local stack, and inspects runs. Each subcommand lives in
// its own file as a command value listed in commands below.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand: Run gets the arguments after its name.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv carries the process's streams, so commands are testable.
type cliEnv struct {
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// commands lists every subcommand. Keep it sorted by name.
func commands() []command {
	return []command{
		auditCommand(),
		customersCommand(),
		demoCommand(),
		helpCommand(),
		reportCommand(),
		runCommand(),
		serveCommand(),
		statusCommand(),
		stripeSimCommand(),
		workflowCommand(),
	}
}

// errUsage marks a usage error: the message was printed, exit status 2.
var errUsage = errors.New("usage error")

// exitError carries a specific exit status (for example 1 for a failed audit).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &cliEnv{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	err := realMain(ctx, env, os.Args[1:])
	stop()
	os.Exit(exitCode(env, err))
}

func exitCode(env *cliEnv, err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	fmt.Fprintln(env.stderr, "billrun:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func realMain(ctx context.Context, env *cliEnv, args []string) error {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" && len(args) == 1 {
		usage(env.stdout, cmds)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	for _, c := range cmds {
		if c.name == args[0] {
			return c.run(ctx, env, args[1:])
		}
	}
	fmt.Fprintf(env.stderr, "billrun: unknown command %q\n\n", args[0])
	usage(env.stderr, cmds)
	return errUsage
}

func usage(w io.Writer, cmds []command) {
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	fmt.Fprintln(w, "billrun bills every customer exactly once per period.")
	fmt.Fprintln(w, "\nUsage: billrun COMMAND [flags]   (billrun COMMAND --help for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
}
