package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"
)

// dockerfile is the recipe of a scratch image: the binaries at the root,
// exec-form entrypoint and command (a JSON array is valid exec form).
func dockerfile(s Spec) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("FROM scratch\n")
	for _, bin := range s.Binaries {
		fmt.Fprintf(&b, "COPY %s /%s\n", bin.Name, bin.Name)
	}
	lines, err := execForm(s.Entrypoint, s.Cmd)
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	return b.Bytes(), nil
}

// execForm is the ENTRYPOINT and CMD lines of a Dockerfile, in exec form
// (a JSON array is valid exec form); an empty one is left out.
func execForm(entrypoint, cmd []string) ([]string, error) {
	var out []string
	for _, line := range []struct {
		word string
		args []string
	}{{"ENTRYPOINT", entrypoint}, {"CMD", cmd}} {
		if len(line.args) == 0 {
			continue
		}
		j, err := json.Marshal(line.args)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", line.word, err)
		}
		out = append(out, line.word+" "+string(j))
	}
	return out, nil
}

// buildContext tars the Dockerfile and the binaries in dir. Times are
// fixed so that identical binaries hit the engine's layer cache.
func buildContext(dir string, s Spec) (*bytes.Buffer, error) {
	df, err := dockerfile(s)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, body []byte) error {
		hdr := &tar.Header{Name: name, Mode: mode, Size: int64(len(body)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	if err := add("Dockerfile", 0o644, df); err != nil {
		return nil, fmt.Errorf("tar build context: %w", err)
	}
	for _, bin := range s.Binaries {
		body, err := os.ReadFile(filepath.Join(dir, bin.Name))
		if err != nil {
			return nil, fmt.Errorf("tar build context: %w", err)
		}
		if err := add(bin.Name, 0o755, body); err != nil {
			return nil, fmt.Errorf("tar build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar build context: %w", err)
	}
	return &buf, nil
}

// dockerBuild builds the image from the binaries in dir and returns its ID.
func dockerBuild(ctx context.Context, docker engine, dir string, s Spec, ref string, labels map[string]string) (string, error) {
	tarball, err := buildContext(dir, s)
	if err != nil {
		return "", err
	}
	res, err := docker.ImageBuild(ctx, tarball, client.ImageBuildOptions{
		Tags:        []string{ref},
		Labels:      labels,
		Remove:      true,
		ForceRemove: true,
		// The classic builder needs no BuildKit session and no pull for
		// FROM scratch.
		Version: build.BuilderV1,
	})
	if err != nil {
		return "", fmt.Errorf("docker build %s: %w", ref, err)
	}
	defer res.Body.Close()
	id, err := readBuildStream(res.Body)
	if err != nil {
		return "", fmt.Errorf("docker build %s: %w", ref, err)
	}
	if id == "" {
		// Older engines do not always send the aux ID message.
		img, err := docker.ImageInspect(ctx, ref)
		if err != nil {
			return "", fmt.Errorf("inspect built image %s: %w", ref, err)
		}
		id = img.ID
	}
	return id, nil
}

// buildMessage is one line of the engine's JSON build stream.
type buildMessage struct {
	Stream      string `json:"stream"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
	Aux json.RawMessage `json:"aux"`
}

// readBuildStream drains the build output, returning the image ID from the
// aux message, or the engine's error with the last lines of output, which
// say which step failed.
func readBuildStream(r io.Reader) (string, error) {
	var id string
	var tail []string
	dec := json.NewDecoder(r)
	for {
		var m buildMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("read build output: %w", err)
		}
		if msg := m.Error; msg != "" || m.ErrorDetail != nil {
			if msg == "" {
				msg = m.ErrorDetail.Message
			}
			return "", fmt.Errorf("%s\n%s", msg, strings.Join(tail, "\n"))
		}
		if s := strings.TrimSpace(m.Stream); s != "" {
			tail = append(tail, s)
			if len(tail) > 10 {
				tail = tail[1:]
			}
		}
		if len(m.Aux) > 0 {
			var aux struct{ ID string }
			if json.Unmarshal(m.Aux, &aux) == nil && aux.ID != "" {
				id = aux.ID
			}
		}
	}
	return id, nil
}
