package pgstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/meshbus/mesh/internal/pgtest"
	"github.com/meshbus/mesh/mesh/controller/pgstore"
	"github.com/meshbus/mesh/mesh/controller/store"
)

// TestDeadLettersKeptBeforeTheirKeyAreKnownByIt: a dead letter a
// controller kept before dead letters had a key (schema 9, by DEAD
// sequence alone) is the same record once migrated (0010): put again, it
// is replaced, not kept twice; and a letter without a sequence is kept
// beside it.
func TestDeadLettersKeptBeforeTheirKeyAreKnownByIt(t *testing.T) {
	const keyed = 10
	srv := pgtest.Start(t)
	dsn := srv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.MigrateTo(ctx, pool, keyed-1); err != nil {
		t.Fatalf("migrate to %d: %v", keyed-1, err)
	}
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	old := store.DeadLetter{DeadSeq: 12, Consumer: "node-b_logger", Node: "node-b", Module: "logger", StreamSeq: 40, EventID: "e1", Deliveries: 5, At: at}
	doc, _ := json.Marshal(old)
	// As PutDeadLetter wrote it at schema 9.
	if _, err := pool.Exec(ctx, `INSERT INTO dead_letters (dead_seq, document) VALUES ($1, $2)`, int64(old.DeadSeq), string(doc)); err != nil {
		t.Fatal(err)
	}
	pool.Close()

	st := open(t, dsn)
	if sc := st.Schema(); !slices.Contains(sc.Applied, keyed) {
		t.Fatalf("expected the open to apply migration %d, got %+v", keyed, sc)
	}
	if err := st.Create(ctx, genesis(t)); err != nil {
		t.Fatal(err)
	}
	again := old
	again.Subject = "mesh.mod.sensor.event.reading"
	unpositioned := store.DeadLetter{Consumer: "node-b_logger", EventID: "e1", Deliveries: 5, At: at}
	if err := st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutDeadLetter(ctx, again); err != nil {
			return err
		}
		return tx.PutDeadLetter(ctx, unpositioned)
	}); err != nil {
		t.Fatal(err)
	}
	dead, err := st.DeadLetters(ctx)
	if err != nil || len(dead) != 2 || dead[0].DeadSeq != 0 || dead[1].DeadSeq != 12 || dead[1].Subject != again.Subject {
		t.Fatalf("expected the letter without a sequence, then letter 12 replaced, got %+v (%v)", dead, err)
	}
}
