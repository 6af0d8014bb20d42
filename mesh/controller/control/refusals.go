package control

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/meshbus/mesh/mesh/controller/store"
)

// countRefusal counts x within tx. The caller's ledger entry, put in the
// same update, is what keeps a redelivery from counting it again.
func countRefusal(ctx context.Context, tx store.Tx, x store.Refusal) error {
	refused, err := tx.Refusals(ctx)
	if err != nil {
		return err
	}
	return tx.PutRefusals(ctx, refused.With(x))
}

// RecordRefusal counts a CONTROL message that could not be read, once
// however often it is delivered: a message whose key the ledger holds is
// not counted again. It reports whether this call counted it.
func RecordRefusal(ctx context.Context, st store.Store, x store.Refusal) (bool, error) {
	counted := false
	err := st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Applied(ctx, x.Key); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		counted = true
		outcome, _ := json.Marshal(struct {
			Refused string `json:"refused"`
		}{x.Reason})
		return errors.Join(countRefusal(ctx, tx, x), tx.PutApplied(ctx, store.Applied{Key: x.Key, At: x.At, Outcome: outcome}))
	})
	return counted && err == nil, err
}
