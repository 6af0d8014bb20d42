package amqpplane_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/meshbus/mesh/mesh/artifact"
	"github.com/meshbus/mesh/mesh/link/plane"
	"github.com/meshbus/mesh/mesh/wire"
)

// fetchedFromTheRepository: the builder's fetch reaches the repository's
// queue and its answer the builder, by correlation id and the
// repository's key; with nobody serving the repository, the fetch says so
// at once rather than waiting out its deadline.
func fetchedFromTheRepository(t *testing.T, bus *amqpBus) {
	ctx := ctxT(t, time.Minute)
	b := bus.Builder()
	s, repo := bus.Source()
	request := wire.Marshal(wire.FetchRequest{Module: "sensor", Revision: "r2"})
	started := time.Now()
	if _, err := b.FetchRevision(ctx, repo, request); !errors.Is(err, plane.ErrNoAnswerer) || time.Since(started) > 5*time.Second {
		t.Fatalf("nobody serving: expected ErrNoAnswerer at once, got %v after %v", err, time.Since(started))
	}
	stop, err := s.ServeFetches(ctx, repo, func(f plane.Fetch) {
		req, err := wire.ParseFetchRequest(f.Data())
		if err != nil {
			t.Errorf("the repository read a malformed fetch: %v", err)
			return
		}
		_ = f.Answer(wire.Marshal(wire.FetchAnswer{Module: req.Module, Revision: req.Revision, Content: []byte("content of " + req.Revision)}))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	for _, rev := range []string{"r2", "r3"} {
		got, err := b.FetchRevision(ctx, repo, wire.Marshal(wire.FetchRequest{Module: "sensor", Revision: rev}))
		if err != nil {
			t.Fatalf("fetch %s: %v", rev, err)
		}
		ans, err := wire.ParseFetchAnswer(got)
		if err != nil || ans.Revision != rev || string(ans.Content) != "content of "+rev {
			t.Fatalf("fetch %s: expected its content, got %+v %v", rev, ans, err)
		}
	}
}

// artifactCopiedToItsHost: what the builder put is copied by the
// controller to the host whose declaration names it, and to no other; a
// chunk put again with other bytes is what the next copy carries, and the
// host refuses it, naming both digests.
func artifactCopiedToItsHost(t *testing.T, bus *amqpBus) {
	ctx := ctxT(t, 2*time.Minute)
	a, other := bus.Nodes()
	data := []byte(strings.Repeat("an artifact of three chunks ", 3*wire.ArtifactChunkSize/28+1))
	digest, chunks, err := bus.Builder().PutArtifact(ctx, data)
	if err != nil || digest != wire.Digest(data) || chunks != wire.ChunksOf(int64(len(data))) {
		t.Fatalf("put: expected %s in %d chunks, got %s %d %v", wire.Digest(data), wire.ChunksOf(int64(len(data))), digest, chunks, err)
	}
	stop, err := bus.ctl.ServeArtifacts(ctx, func(_ context.Context, node, d string) (int64, error) {
		if node == a && d == digest {
			return int64(len(data)), nil
		}
		return 0, errors.New("not declared to " + node)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	got, err := bus.Host(a).Artifact(ctx, digest, int64(len(data)))
	if err != nil || string(got) != string(data) {
		t.Fatalf("%s: expected the artifact, got %d bytes, %v", a, len(got), err)
	}
	_, err = bus.Host(other).Artifact(ctx, digest, int64(len(data)))
	if !errors.Is(err, artifact.ErrMissing) || !strings.Contains(err.Error(), "not declared to "+other) {
		t.Fatalf("%s: expected the controller's refusal, got %v", other, err)
	}
	if n := bus.br.Inspect(t, bus.br.Dial(t, wire.ControllerUser), wire.ArtifactsQueue(other)).Messages; n != 0 {
		t.Fatalf("%s: expected nothing copied but the refusal, read, got %d waiting", other, n)
	}

	// The builder puts chunk 1 again, other bytes under its key.
	ch, err := bus.br.Dial(t, wire.BuilderUser).Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	forged := []byte(strings.Repeat("x", wire.ArtifactChunkSize))
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, wire.ExchangeControl, wire.ArtifactChunk(digest, 1), true, false, amqp.Publishing{UserId: wire.BuilderUser, Body: forged})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(ctx); !ok || err != nil {
		t.Fatalf("the builder's chunk not confirmed: %v", err)
	}
	fetched := wire.Digest(append(append(append([]byte{}, data[:wire.ArtifactChunkSize]...), forged...), data[2*wire.ArtifactChunkSize:]...))
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = bus.Host(a).Artifact(ctx, digest, int64(len(data)))
		if errors.Is(err, artifact.ErrDigest) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // the index follows the stream
	}
	if !errors.Is(err, artifact.ErrDigest) || !strings.Contains(err.Error(), digest) || !strings.Contains(err.Error(), fetched) {
		t.Fatalf("expected the overwritten artifact refused naming %s and %s, got %v", digest, fetched, err)
	}
}
