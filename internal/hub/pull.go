package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
)

// inferenceFile reports whether mlxcel needs a repository file: weights,
// their index, configs, tokenizer and chat template. README, images,
// PyTorch/GGUF/ONNX copies and the like are never downloaded.
func inferenceFile(name string) bool {
	if strings.Contains(name, "/") {
		return false // subfolders hold other formats (onnx/, original/, ...)
	}
	switch name {
	case "config.json", "generation_config.json", indexFile, "tokenizer.json", "tokenizer_config.json",
		"special_tokens_map.json", "added_tokens.json", "chat_template.json", "chat_template.jinja",
		"preprocessor_config.json", "processor_config.json":
		return true
	}
	return strings.HasSuffix(name, ".safetensors") || strings.HasSuffix(name, ".jinja")
}

// repoInfo is the part of /api/models/{repo}/revision/{rev} used here.
type repoInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string `json:"rfilename"`
	} `json:"siblings"`
}

// revisionInfo asks the Hub which commit a revision is and what it holds.
func (c *Client) revisionInfo(ctx context.Context, ref Ref) (*repoInfo, error) {
	u := fmt.Sprintf("%s/api/models/%s/revision/%s", c.Endpoint, ref.Repo, url.PathEscape(ref.Revision))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	c.headers(req)
	var info repoInfo
	err = c.retry(ctx, ref.Repo, func() error {
		resp, err := c.HTTP.Do(req)
		if err != nil {
			return retryable{err}
		}
		defer resp.Body.Close()
		if err := c.statusError(ref, "", resp); err != nil {
			return err
		}
		return json.NewDecoder(resp.Body).Decode(&info)
	})
	if err != nil {
		return nil, err
	}
	if !commitSHA.MatchString(info.SHA) {
		return nil, fmt.Errorf("%s: the Hub answered no commit sha for revision %s", ref.Repo, ref.Revision)
	}
	return &info, nil
}

// Pull downloads what inference needs of ref into the cache and returns
// its snapshot folder. Files already cached are not fetched again.
func (c *Client) Pull(ctx context.Context, ref Ref) (string, error) {
	if c.Offline {
		return c.Cached(ref)
	}
	info, err := c.revisionInfo(ctx, ref)
	if err != nil {
		return "", err
	}
	var files []string
	for _, s := range info.Siblings {
		if inferenceFile(s.RFilename) {
			files = append(files, s.RFilename)
		}
	}
	sort.Strings(files)
	if err := checkFiles(ref, files); err != nil {
		return "", err
	}
	commit := Ref{Repo: ref.Repo, Revision: info.SHA}
	files, err = c.dropUnindexed(ctx, commit, files)
	if err != nil {
		return "", err
	}
	metas := make([]fileMeta, len(files))
	var total int64
	for i, f := range files {
		if metas[i], err = c.head(ctx, commit, f); err != nil {
			return "", err
		}
		total += metas[i].Size
	}
	p := newProgress(c.Log, c.TTY, ref.String(), len(files), total)
	for i := range metas {
		if err := c.fetch(ctx, commit, &metas[i], p); err != nil {
			p.abort()
			return "", err
		}
	}
	p.finish()
	if err := c.writeRef(ref, info.SHA); err != nil {
		return "", err
	}
	return c.Cached(commit)
}

// checkFiles refuses repositories mlxcel cannot load before anything is
// downloaded.
func checkFiles(ref Ref, files []string) error {
	var cfg, weights bool
	for _, f := range files {
		cfg = cfg || f == "config.json"
		weights = weights || strings.HasSuffix(f, ".safetensors")
	}
	switch {
	case !cfg:
		return fmt.Errorf("%s: no config.json in the repository (not a transformers/MLX model)", ref)
	case !weights:
		return fmt.Errorf("%s: no *.safetensors weights (mlxcel reads safetensors; GGUF and PyTorch .bin are not supported)", ref)
	}
	return nil
}

// dropUnindexed fetches the safetensors index first when there is one and
// keeps only the shards it names: some repositories also carry a
// consolidated copy of the same weights.
func (c *Client) dropUnindexed(ctx context.Context, commit Ref, files []string) ([]string, error) {
	hasIndex := false
	for _, f := range files {
		hasIndex = hasIndex || f == indexFile
	}
	if !hasIndex {
		return files, nil
	}
	m, err := c.head(ctx, commit, indexFile)
	if err != nil {
		return nil, err
	}
	if err := c.fetch(ctx, commit, &m, nil); err != nil {
		return nil, err
	}
	shards, err := indexShards(c.snapshotDir(commit.Repo, commit.Revision))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", commit.Repo, err)
	}
	keep := map[string]bool{}
	for _, s := range shards {
		keep[s] = true
	}
	var out []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".safetensors") || keep[f] {
			out = append(out, f)
			delete(keep, f)
		}
	}
	if len(keep) > 0 {
		var missing []string
		for s := range keep {
			missing = append(missing, s)
		}
		sort.Strings(missing)
		return nil, fmt.Errorf("%s: %s names shards the repository lacks: %s", commit.Repo, indexFile, strings.Join(missing, ", "))
	}
	return out, nil
}

// headers sets what every Hub request carries.
func (c *Client) headers(req *http.Request) {
	req.Header.Set("User-Agent", "mlxcel")
	if c.Token != "" && c.sameHost(req.URL) {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
}

// sameHost keeps the token off other hosts (the CDN gets signed URLs).
func (c *Client) sameHost(u *url.URL) bool {
	ep, err := url.Parse(c.Endpoint)
	return err == nil && ep.Host == u.Host
}

// statusError turns a failed Hub answer into one line saying what to do.
// The Hub names the cause in X-Error-Code; private and gated repositories
// answer 401 to anonymous requests.
func (c *Client) statusError(ref Ref, file string, resp *http.Response) error {
	if resp.StatusCode < 400 {
		return nil
	}
	what := ref.String()
	if file != "" {
		what += ": " + file
	}
	code := resp.Header.Get("X-Error-Code")
	switch {
	case resp.StatusCode == http.StatusUnauthorized && c.Token == "":
		return fmt.Errorf("%s: the Hub refused access (401): the repository is gated or private, or does not exist; set HF_TOKEN (or run huggingface-cli login) with a token that may read it", what)
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%s: the Hub refused the token in HF_TOKEN (401): check it, or the repository does not exist", what)
	case resp.StatusCode == http.StatusForbidden || code == "GatedRepo":
		return fmt.Errorf("%s: access is gated (403): accept the conditions on %s/%s with the account of HF_TOKEN", what, c.Endpoint, ref.Repo)
	case resp.StatusCode == http.StatusNotFound && code == "RevisionNotFound":
		return fmt.Errorf("%s: revision %q not found (404)", ref.Repo, ref.Revision)
	case resp.StatusCode == http.StatusNotFound && code == "EntryNotFound":
		return fmt.Errorf("%s: file not found in the repository (404)", what)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: repository not found on %s (404): check the name", what, c.Endpoint)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return retryable{fmt.Errorf("%s: the Hub answered %s", what, resp.Status)}
	}
	return fmt.Errorf("%s: the Hub answered %s", what, resp.Status)
}

// retryable marks errors worth another attempt.
type retryable struct{ err error }

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

func isRetryable(err error) bool {
	var r retryable
	return errors.As(err, &r)
}

// fileURL is the resolve URL of a file at a commit.
func (c *Client) fileURL(commit Ref, file string) string {
	return fmt.Sprintf("%s/%s/resolve/%s/%s", c.Endpoint, commit.Repo, url.PathEscape(commit.Revision), escapePath(file))
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return path.Join(parts...)
}
