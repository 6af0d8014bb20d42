package rabbitmq

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	tcexec "github.com/testcontainers/testcontainers-go/exec"
)

// The harness asks the broker for what its definitions cannot say (the
// queues' counts, an observer added, the firehose turned on) many times a
// scenario. rabbitmqctl boots an Erlang VM and the Elixir CLI for each
// command: 0.8 s and 0.9 core-seconds on an idle 2-core machine, about
// fifty times in the living bed's AMQP scenarios, a fifth of the
// machine's CPU while they run. erl_call, Erlang's own client for a
// running node (erl_interface, installed beside rabbitmqctl with
// erlang-base), makes the one call to the node that the rabbitmqctl
// command makes, through the same distribution port and cookie, in 0.07 s
// and 0.02 core-seconds. Where an image has no erl_call on its PATH (the
// official images keep it out of it), the same commands run through
// rabbitmqctl, as before.

// errNoErlCall: the image has no erl_call; the caller asks rabbitmqctl.
var errNoErlCall = errors.New("erl_call is not on the image's PATH")

// erlCallScript runs erl_call against the broker's node with the
// expression given as $1. The node is rabbit@localhost in our image
// (RABBITMQ_NODENAME), rabbit@<short hostname> where the variable is not
// set, as rabbitmq-server names it.
const erlCallScript = `command -v erl_call >/dev/null 2>&1 || exit 127
printf '%s\n' "$1" | exec erl_call -n "${RABBITMQ_NODENAME:-rabbit@$(hostname -s)}" -e`

// erlCallAnswer is what erl_call prints for an expression that evaluated:
// {ok, Value}, Value here the base64 of the JSON, a string.
var erlCallAnswer = regexp.MustCompile(`^\{ok,\s*"([A-Za-z0-9+/=]*)"\}$`)

// evalJSON evaluates expr, an Erlang expression, on the broker's node and
// returns its value encoded as JSON by the broker itself (rabbit_json).
// The value travels base64-encoded: erl_call prints a term, and a string
// of base64 prints as itself. Anything a caller puts into expr must be
// spelled by erlBinary or erlAtoms, never pasted.
func (c *RabbitMQContainer) evalJSON(ctx context.Context, expr string) ([]byte, error) {
	if c.ctlOnly {
		return nil, errNoErlCall
	}
	wrapped := "base64:encode_to_string(rabbit_json:encode(begin " + expr + " end))."
	code, r, err := c.Exec(ctx, []string{"sh", "-c", erlCallScript, "sh", wrapped}, tcexec.Multiplexed())
	if err != nil {
		return nil, fmt.Errorf("erl_call: %w", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("erl_call: read output: %w", err)
	}
	if code == 127 {
		return nil, errNoErlCall
	}
	answer := strings.TrimSpace(string(out))
	m := erlCallAnswer.FindStringSubmatch(answer)
	if code != 0 || m == nil {
		return nil, fmt.Errorf("erl_call exited %d: %s", code, answer)
	}
	doc, err := base64.StdEncoding.DecodeString(m[1])
	if err != nil {
		return nil, fmt.Errorf("erl_call: %w: %s", err, answer)
	}
	return doc, nil
}

// erlBinary spells s as an Erlang binary of its bytes, <<104,105>>: no
// quoting to get wrong, whatever s holds.
func erlBinary(s string) string {
	var b strings.Builder
	b.WriteString("<<")
	for i := 0; i < len(s); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(s[i])))
	}
	b.WriteString(">>")
	return b.String()
}

// infoItem is what an info item of rabbitmqctl's list commands may be: a
// lower-case atom.
var infoItem = regexp.MustCompile(`^[a-z][a-z_]*$`)

// erlAtoms spells items, info items, as an Erlang list of atoms.
func erlAtoms(items []string) (string, error) {
	for _, it := range items {
		if !infoItem.MatchString(it) {
			return "", fmt.Errorf("info item %q is not one the broker could know", it)
		}
	}
	return "[" + strings.Join(items, ",") + "]", nil
}

// infoAllJSON is the expression that lists what module:info_all(VHost,
// Items) says of every queue or binding of a virtual host, as
// rabbitmqctl's JSON formatter writes it: a list of objects, a resource
// (a queue's name) as its name.
func infoAllJSON(module, vhost string, items []string) (string, error) {
	atoms, err := erlAtoms(items)
	if err != nil {
		return "", err
	}
	return "[maps:from_list([{K, case V of {resource, _, _, N} -> N; _ -> V end} || {K, V} <- I]) || I <- " +
		module + ":info_all(" + erlBinary(vhost) + ", " + atoms + ")]", nil
}

// ListQueues is what the broker says of the queues of virtual host vhost,
// columns as rabbitmqctl list_queues names its info items, in the JSON
// rabbitmqctl list_queues --formatter json writes: the broker's own
// counts, asked of the queues, not the management API's sampled ones.
func (c *RabbitMQContainer) ListQueues(ctx context.Context, vhost string, columns ...string) ([]byte, error) {
	return c.infoAll(ctx, "rabbit_amqqueue", "list_queues", vhost, columns)
}

// ListBindings is ListQueues for the bindings of virtual host vhost
// (rabbitmqctl list_bindings).
func (c *RabbitMQContainer) ListBindings(ctx context.Context, vhost string, columns ...string) ([]byte, error) {
	return c.infoAll(ctx, "rabbit_binding", "list_bindings", vhost, columns)
}

func (c *RabbitMQContainer) infoAll(ctx context.Context, module, command, vhost string, columns []string) ([]byte, error) {
	expr, err := infoAllJSON(module, vhost, columns)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	doc, err := c.evalJSON(ctx, expr)
	if errors.Is(err, errNoErlCall) {
		out, err := c.Ctl(ctx, append([]string{command, "-q", "-p", vhost, "--formatter", "json"}, columns...)...)
		return []byte(out), err
	}
	if err != nil {
		return nil, fmt.Errorf("%s -p %s: %w", command, vhost, err)
	}
	return doc, nil
}

// cliUser is who the broker records as having made a change the harness
// made, as rabbitmqctl's commands do ("rmq-cli").
const cliUser = "rmq-cli"

// AddUser adds user with password and no tags (rabbitmqctl add_user).
func (c *RabbitMQContainer) AddUser(ctx context.Context, user, password string) error {
	return c.change(ctx, "rabbit_auth_backend_internal:add_user("+erlBinary(user)+", "+erlBinary(password)+", "+erlBinary(cliUser)+")",
		"add_user", user, password)
}

// SetPermissions gives user the configure, write and read patterns in
// vhost (rabbitmqctl set_permissions).
func (c *RabbitMQContainer) SetPermissions(ctx context.Context, vhost, user, configure, write, read string) error {
	return c.change(ctx, "rabbit_auth_backend_internal:set_permissions("+erlBinary(user)+", "+erlBinary(vhost)+", "+
		erlBinary(configure)+", "+erlBinary(write)+", "+erlBinary(read)+", "+erlBinary(cliUser)+")",
		"set_permissions", "-p", vhost, user, configure, write, read)
}

// SetTracing turns the firehose of vhost on or off (rabbitmqctl trace_on,
// trace_off).
func (c *RabbitMQContainer) SetTracing(ctx context.Context, vhost string, on bool) error {
	fn, command := "stop", "trace_off"
	if on {
		fn, command = "start", "trace_on"
	}
	return c.change(ctx, "rabbit_trace:"+fn+"("+erlBinary(vhost)+")", command, "-p", vhost)
}

// change makes a change through expr, a call that returns ok (or
// {error, Reason}), or through rabbitmqctl's command where erl_call is
// not to be had.
func (c *RabbitMQContainer) change(ctx context.Context, expr string, command ...string) error {
	doc, err := c.evalJSON(ctx, expr)
	if errors.Is(err, errNoErlCall) {
		if out, err := c.Ctl(ctx, command...); err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", command[0], err)
	}
	if string(doc) != `"ok"` {
		return fmt.Errorf("%s: the broker answered %s", command[0], doc)
	}
	return nil
}
