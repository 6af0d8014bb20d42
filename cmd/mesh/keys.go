package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/seal"
	"github.com/meshbus/mesh/mesh/wire"
)

// maxInput bounds what is read from a file or stdin that should be a
// small document: a sealed credential, a key, a call's arguments (the
// bus's payload is at most 1 MiB).
const maxInput = 1 << 20

func keyNewCmd() command {
	return command{
		name:  "key new",
		usage: "mesh key new --out FILE",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.out, "out", "", "where to write the new key (0600); an existing file is never overwritten")
		},
		do: keyNew,
	}
}

// keyNew writes a new sealing key and prints its public half. The file
// is created exclusively: overwriting a key would lose the private half
// every credential already sealed to it needs.
func keyNew(_ context.Context, o *opts, e env) error {
	if o.out == "" {
		return badInput("--out is required: where to write the key")
	}
	k, err := seal.NewKey()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(o.out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return badInput("%s exists: a key is never overwritten (it would lose the private half the credentials sealed to it need); choose another file", o.out)
	}
	if err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	_, err = f.Write(k.Marshal())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(o.out)
		return fmt.Errorf("write key %s: %w", o.out, err)
	}
	fmt.Fprintln(e.stdout, seal.EncodePublic(k.Public))
	fmt.Fprintf(e.stderr, "mesh key new: wrote %s; give the public key above to mesh-controller person issue --key\n", o.out)
	return nil
}

func credentialOpenCmd() command {
	return command{
		name:  "credential open",
		usage: "mesh credential open --key FILE [--out FILE] SEALED|-",
		flags: func(fs *flag.FlagSet, o *opts) {
			fs.StringVar(&o.key, "key", "", "the key mesh key new wrote")
			fs.StringVar(&o.out, "out", "", "where to write the credential document (0600, replaced atomically); default stdout")
		},
		min: 1, max: 1,
		do: credentialOpen,
	}
}

// credentialOpen opens a sealed credential with the person's key and
// writes the credential document, checked to be the person's.
func credentialOpen(_ context.Context, o *opts, e env) error {
	if o.key == "" {
		return badInput("--key is required: the key mesh key new wrote")
	}
	keyData, err := readSmall(o.key, nil)
	if err != nil {
		return err
	}
	k, err := seal.ParseKey(keyData)
	if err != nil {
		return badInput("%s: %v", o.key, err)
	}
	sealedData, err := readSmall(o.args[0], e.stdin)
	if err != nil {
		return err
	}
	sealed, err := wire.ParseSealedCredential(sealedData)
	if err != nil {
		return badInput("%s: %v (want what mesh-controller person issue printed)", name(o.args[0]), err)
	}
	doc, err := k.Open(sealed.Sealed)
	if errors.Is(err, seal.ErrOpen) {
		return fmt.Errorf("person %s's sealed credential does not open with the key %s: it was sealed to another key (the one given to mesh-controller person issue --key), or changed on the way: %w", sealed.Person, o.key, err)
	}
	if err != nil {
		return fmt.Errorf("open person %s's sealed credential: %w", sealed.Person, err)
	}
	cred, err := wire.ParseCredential(doc)
	if err != nil {
		return fmt.Errorf("person %s's sealed credential opened, but is no credential: %w", sealed.Person, err)
	}
	if cred.Principal != wire.PrincipalPerson || cred.Name != sealed.Person {
		return fmt.Errorf("the sealed credential says it is person %s's, but the document it holds is not (principal %q, name %q)", sealed.Person, cred.Principal, cred.Name)
	}
	if !bytes.HasSuffix(doc, []byte("\n")) {
		doc = append(doc, '\n')
	}
	if o.out == "" {
		_, err := e.stdout.Write(doc)
		return err
	}
	if _, err := atomicfile.Write(o.out, doc, 0o600, atomicfile.SyncDir); err != nil {
		return fmt.Errorf("write the credential: %w", err)
	}
	// Write leaves a file whose content is already this alone, whatever
	// its mode: a credential is the person's to read only.
	if err := os.Chmod(o.out, 0o600); err != nil {
		return fmt.Errorf("write the credential: %w", err)
	}
	fmt.Fprintf(e.stderr, "mesh credential open: wrote person %s's credential to %s; use it with --credential %s or MESH_CREDENTIAL=%s\n", cred.Name, o.out, o.out, o.out)
	return nil
}

// readSmall reads a small document from path, or from stdin when path is
// "-" and stdin is given.
func readSmall(path string, stdin io.Reader) ([]byte, error) {
	var r io.Reader
	if path == "-" && stdin != nil {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, badInput("%v", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name(path), err)
	}
	if len(data) > maxInput {
		return nil, badInput("%s: more than %d bytes; not what it should be", name(path), maxInput)
	}
	return data, nil
}

// name is how a path is named in a message.
func name(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}
