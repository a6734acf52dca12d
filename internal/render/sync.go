package render

import (
	"context"
	"encoding/json"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
)

// Sync runs the Workspace sync hook in process on req, decoded from its
// JSON exactly as the server decodes a request body, and returns its
// answer. It is how the tools outside the server (render, the kubectl
// plugin's diff) get what this version of the hook would answer.
func Sync(ctx context.Context, cfg workspace.Config, req *metacontroller.CompositeRequest) (*metacontroller.CompositeResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var wreq workspace.Request
	if err := wreq.Decode(body); err != nil {
		return nil, &metacontroller.InvalidObjectError{What: "Workspace request", Err: err}
	}
	return workspace.New(cfg).Sync(ctx, &wreq)
}
