package githubtest

import (
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v62/github"
)

// A check run request carries at most maxAnnotations annotations (checkRunOutputError,
// textlimits.go); to write more, a client updates the check run again, and GitHub appends each
// request's: "Each time you update the check run, annotations are appended to the list of
// annotations that already exist for the check run."
// https://docs.github.com/rest/checks/runs#update-a-check-run

// appendAnnotations returns output without its annotations, which it appends to the check
// run's: a check run answer shows annotations_count, never the annotations themselves.
func (cr *checkRun) appendAnnotations(output json.RawMessage) json.RawMessage {
	var out map[string]json.RawMessage
	if json.Unmarshal(output, &out) != nil {
		return output
	}
	var anns []json.RawMessage
	if raw, ok := out["annotations"]; ok {
		_ = json.Unmarshal(raw, &anns)
		delete(out, "annotations")
	}
	cr.Annotations = append(cr.Annotations, anns...)
	b, err := json.Marshal(out)
	if err != nil {
		return output
	}
	return b
}

// CheckRunAnnotations returns every annotation check run id carries, in the order they were
// written.
func (s *Server) CheckRunAnnotations(id int64) ([]*github.CheckRunAnnotation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cr := s.st.CheckRuns[id]
	if cr == nil {
		return nil, fmt.Errorf("check run %d not found", id)
	}
	out := make([]*github.CheckRunAnnotation, 0, len(cr.Annotations))
	for _, raw := range cr.Annotations {
		var a github.CheckRunAnnotation
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("check run %d: annotation %s: %w", id, raw, err)
		}
		out = append(out, &a)
	}
	return out, nil
}
