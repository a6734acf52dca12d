package main

import (
	"github.com/formspec/formspec-hooks/internal/hooks/datastore"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/nodehealth"
	"github.com/formspec/formspec-hooks/internal/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/internal/hooks/wake"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/server"
)

// hookRoutes is the hook server's route table, one entry per hook.
// Paths follow fixtures/<controller>/<hook>/, so any fixture can be posted
// to the path its directory names.
func hookRoutes(cfg hookConfig) []server.Route {
	// cfg.reports may be nil (no sidecar): a nil *handoff.Client discards.
	sink := cfg.reports
	ws := workspace.New(workspace.Config{
		ResourceImage:     cfg.resourceImage,
		DefaultVersion:    cfg.defaultVersion,
		ControlClusterURL: cfg.controlClusterURL,
		Reports:           sink,
		ChildCreateGrace:  cfg.childCreateGrace,
		Claims:            cfg.workspaceClaims,
	})
	ds := datastore.New(datastore.Options{Logger: cfg.logger, Decisions: cfg.decisions})
	rc := resourceclaim.New(resourceclaim.Options{Logger: cfg.logger, Decisions: cfg.decisions, Reports: sink, Claims: cfg.claims})
	wk := wake.New()
	type decorator = server.Hook[metacontroller.DecoratorRequest, metacontroller.DecoratorResponse]
	return []server.Route{
		server.HookRoute("/v1/workspace/sync", ws.Sync),
		server.HookRoute("/v1/workspace/finalize", ws.Finalize),
		server.HookRoute("/v1/workspace/customize", ws.Customize),
		server.HookRoute("/v1/datastore/sync", ds.Sync),
		server.HookRoute("/v1/datastore/customize", ds.Customize),
		server.HookRoute("/v1/resourceclaim/sync", rc.Sync),
		server.HookRoute("/v1/resourceclaim/customize", rc.Customize),
		// The optional wake controller's (compositecontrollers/wake-on-request):
		// served always, called only where that controller is installed.
		server.HookRoute("/v1/wake/sync", wk.Sync),
		server.HookRoute("/v1/wake/customize", wk.Customize),
		server.HookRoute("/v1/nodes/sync", decorator(nodehealth.NodeHealth(sink))),
		server.HookRoute("/v1/pods/sync", nodehealth.WorkspacePods(sink)),
	}
}
