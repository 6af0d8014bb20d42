package rabbitmq

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"

	"github.com/meshbus/mesh/harness/images"
	"github.com/meshbus/mesh/harness/owner"
	"github.com/meshbus/mesh/internal/testutil"
)

// TestRabbitMQ ensures the image (ours, unless MESH_RABBITMQ_IMAGE names
// another), starts a broker with a user confined to a virtual host, and
// has that user route one message through a topic exchange; the user is
// refused elsewhere, and no guest appears beside the administrator.
func TestRabbitMQ(t *testing.T) {
	cli := testutil.DockerClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()

	var out bytes.Buffer
	b := &images.Builder{Out: &out, Tag: images.TagFromEnv(os.Getenv)}
	defer b.Close()
	defer func() { t.Logf("builder output:\n%s", out.String()) }()
	override := os.Getenv(EnvImage)
	start := time.Now()
	image, err := EnsureImage(ctx, b, override, images.DebianFromEnv(os.Getenv))
	if err != nil {
		t.Fatalf("ensure image: %v", err)
	}
	t.Logf("image %s ready in %s", image, time.Since(start).Round(100*time.Millisecond))
	if override == "" {
		first, err := cli.ImageInspect(ctx, image)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("image size %d MB", first.Size/1e6)
		out.Reset()
		if _, err := EnsureImage(ctx, b, "", images.DebianFromEnv(os.Getenv)); err != nil {
			t.Fatalf("second ensure: %v", err)
		}
		second, err := cli.ImageInspect(ctx, image)
		if err != nil {
			t.Fatal(err)
		}
		if second.ID != first.ID || !strings.Contains(out.String(), "up to date") {
			t.Fatalf("expected the second ensure to keep image %s, got %s (%q)", first.ID, second.ID, out.String())
		}
	}

	// Labelled as this process's, so that a test killed before its
	// cleanup leaves nothing the next one does not reap.
	labels, err := owner.Claim(ctx, cli.Client, "rabbitmq-test")
	if err != nil {
		t.Logf("reap the leftovers of dead test runs: %v", err)
	}
	nw, err := network.New(ctx, network.WithLabels(labels))
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	t.Cleanup(func() { _ = nw.Remove(context.Background()) })

	start = time.Now()
	c, err := Run(ctx, image,
		WithAdmin("admin", "admin-secret"),
		WithUser("mesh-a", "pw-a"),
		WithVhost("mesh"),
		WithPermissions("mesh-a", "mesh", ".*", ".*", ".*"),
		testcontainers.WithLabels(labels),
		network.WithNetwork([]string{"amqp"}, nw),
	)
	if c != nil {
		testutil.TerminateAtCleanup(t, c)
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("broker ready in %s", time.Since(start).Round(100*time.Millisecond))

	ins, err := c.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ins.Config.Labels[owner.LabelRun] != labels[owner.LabelRun] {
		t.Errorf("expected the caller's label on the container, got %v", ins.Config.Labels)
	}
	if ep := ins.NetworkSettings.Networks[nw.Name]; ep == nil || !slices.Contains(ep.Aliases, "amqp") {
		t.Errorf("expected alias amqp on network %s, got %+v", nw.Name, ins.NetworkSettings.Networks)
	}

	userURL, err := c.AmqpURLFor(ctx, "mesh-a", "mesh")
	if err != nil {
		t.Fatal(err)
	}
	routeOne(t, ctx, userURL)

	addr, err := c.Address(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ae *amqp.Error
	_, err = amqp.Dial(URL(addr, "mesh-a", "pw-a", "/"))
	if !errors.As(err, &ae) || (ae.Code != amqp.NotAllowed && ae.Code != amqp.AccessRefused) {
		t.Errorf("expected mesh-a refused on vhost /, got %v", err)
	}
	_, err = amqp.Dial(URL(addr, "mesh-a", "wrong", "mesh"))
	if !errors.As(err, &ae) || ae.Code != amqp.AccessRefused {
		t.Errorf("expected a wrong password refused, got %v", err)
	}
	adminURL, err := c.AmqpURL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(adminURL)
	if err != nil {
		t.Fatalf("expected the administrator to connect, got %v", err)
	}
	conn.Close()

	users, err := c.Ctl(ctx, "list_users", "--quiet", "--no-table-headers")
	if err != nil {
		t.Fatal(err)
	}
	if names := firstWords(users); !slices.Equal(names, []string{"admin", "mesh-a"}) {
		t.Errorf("expected users admin and mesh-a only, rabbitmqctl lists %q", names)
	}

	t.Run("the broker's own calls through erl_call", func(t *testing.T) { brokersOwnCalls(t, ctx, c, false) })
	t.Run("the same through rabbitmqctl alone", func(t *testing.T) { brokersOwnCalls(t, ctx, c, true) })
	// Last: it takes the broker's users and virtual hosts away.
	t.Run("recycled and reused, it holds nothing of before", func(t *testing.T) { recycled(t, ctx, c) })
}

// recycled leaves a durable queue with a persistent message and a user
// behind, recycles the broker and reuses it for another user and virtual
// host, and expects only those: the users, the virtual hosts, no queue,
// the old user refused, the new one routing.
func recycled(t *testing.T, ctx context.Context, c *RabbitMQContainer) {
	url, err := c.AmqpURLFor(ctx, "mesh-a", "mesh")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("kept", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.PublishWithContext(ctx, "", "kept", false, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := c.AddUser(ctx, "left-behind", "pw"); err != nil {
		t.Fatal(err)
	}

	if err := c.Recycle(ctx); err != nil {
		t.Fatalf("recycle: %v", err)
	}
	if err := c.Reuse(ctx, nil, WithConfig("heartbeat = 5")); !errors.Is(err, ErrNotReusable) {
		t.Errorf("expected another configuration refused with ErrNotReusable, got %v", err)
	}
	if err := c.Reuse(ctx, nil, WithUser("mesh-b", "pw-b"), WithVhost("other"), WithPermissions("mesh-b", "other", ".*", ".*", ".*")); err != nil {
		t.Fatalf("reuse: %v", err)
	}

	users, err := c.Ctl(ctx, "list_users", "--quiet", "--no-table-headers")
	if err != nil {
		t.Fatal(err)
	}
	vhosts, err := c.Ctl(ctx, "list_vhosts", "--quiet", "--no-table-headers")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := firstWords(users), []string{"admin", "mesh-b"}; !slices.Equal(got, want) {
		t.Errorf("expected users %q after the reuse, got %q", want, got)
	}
	if got, want := firstWords(vhosts), []string{"/", "other"}; !slices.Equal(got, want) {
		t.Errorf("expected virtual hosts %q after the reuse, got %q", want, got)
	}
	for _, vhost := range []string{"/", "other"} {
		queues, err := c.ListQueues(ctx, vhost, "name")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(queues)) != "[]" {
			t.Errorf("expected no queue on %s after the reuse, got %s", vhost, queues)
		}
	}
	addr, err := c.Address(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ae *amqp.Error
	if _, err := amqp.Dial(URL(addr, "mesh-a", "pw-a", "mesh")); !errors.As(err, &ae) || ae.Code != amqp.AccessRefused {
		t.Errorf("expected mesh-a, of before the reuse, refused, got %v", err)
	}
	url, err = c.AmqpURLFor(ctx, "mesh-b", "other")
	if err != nil {
		t.Fatal(err)
	}
	routeOne(t, ctx, url)
}

// firstWords is the sorted first word of each line of out.
func firstWords(out string) []string {
	var words []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			words = append(words, f[0])
		}
	}
	slices.Sort(words)
	return words
}

// routeOne declares a topic exchange, binds a private queue to a
// pattern, publishes one message that matches it and one that does not,
// and expects exactly the first back with its headers.
func routeOne(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("dial as mesh-a: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	const exchange = "mesh.events.test"
	if err := ch.ExchangeDeclare(exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatalf("declare exchange: %v", err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		t.Fatalf("declare queue: %v", err)
	}
	if err := ch.QueueBind(q.Name, "orders.#", exchange, false, nil); err != nil {
		t.Fatalf("bind queue: %v", err)
	}
	deliveries, err := ch.Consume(q.Name, "test", false, true, false, false, nil)
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"billing.paid", "orders.created"} {
		conf, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, false, false, amqp.Publishing{
			ContentType: "application/json",
			MessageId:   "ev-" + key,
			Headers:     amqp.Table{"x-source": "orders"},
			Body:        []byte(`{"key":"` + key + `"}`),
		})
		if err != nil {
			t.Fatalf("publish %s: %v", key, err)
		}
		if ok, err := conf.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("publish %s: expected a confirm, got %v, %v", key, ok, err)
		}
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	select {
	case d := <-deliveries:
		if d.RoutingKey != "orders.created" || d.MessageId != "ev-orders.created" || d.Headers["x-source"] != "orders" ||
			string(d.Body) != `{"key":"orders.created"}` {
			t.Fatalf("expected orders.created with its id, header and body, got key %q id %q headers %v body %s",
				d.RoutingKey, d.MessageId, d.Headers, d.Body)
		}
		if err := d.Ack(false); err != nil {
			t.Fatal(err)
		}
	case <-wait.Done():
		t.Fatal("expected a delivery within 10s, got none")
	}
	// Both publishes are confirmed, so a routed billing.paid is on its
	// way before the cancel's answer; the channel of deliveries closes after
	// it.
	if err := ch.Cancel("test", false); err != nil {
		t.Fatal(err)
	}
	for d := range deliveries {
		t.Fatalf("expected no other delivery, got key %q", d.RoutingKey)
	}
}
