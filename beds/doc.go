// Package beds holds the beds — the executable acceptance suites of design 25 §10, one per
// step of the move to NATS — and runs them through godog.
//
// A bed is data (Bed): a name, a step number, an owner, the feature files it runs and a
// timeout. Every bed is registered by one explicit call in registerAll, checked as it is
// added, so a duplicated name or a missing feature fails before anything runs.
//
// Run executes the selected beds in step order, strictly (an undefined, pending or ambiguous
// step fails), stopping at the first bed that is not green; a scenario the run's interrupt
// cuts short is Interrupted, not Failed. It narrates every scenario and step with its
// timing, and writes junit.xml, cucumber.json, measurements.json and matrix.json into a
// report directory. Check refuses bad input (tags, a selection of nothing) before anything
// runs. The step definitions are not here: the caller binds them through Options.Suite and Options.Scenario, and a step talks
// back to the runner through its context (Measure, Logf, ArtifactDir, Current) or writes its
// narration to the run's Console.
//
// The runner follows godog through hooks that surround the caller's rather than through a
// godog formatter (those live in godog's global table and get no per-run state), and writes
// its reports itself: in godog v0.16 the junit formatter miscounts ambiguous and skipped
// scenarios, and the cucumber formatter panics after a fail-fast stop.
package beds
