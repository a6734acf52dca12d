package main

import (
	"net/http"
	"strings"

	"github.com/formspec/formspec-hooks/hooks/datastore"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/hooks/observe"
	"github.com/formspec/formspec-hooks/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/hooks/server"
	"github.com/formspec/formspec-hooks/hooks/workspace"
)

// hookRoutes is the hook server's route table (SPEC §5), one entry per hook.
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
	})
	ds := datastore.New(datastore.Options{Logger: cfg.logger, Decisions: cfg.decisions})
	rc := resourceclaim.New(resourceclaim.Options{Logger: cfg.logger, Decisions: cfg.decisions, Reports: sink})
	opts := cfg.handlerOptions
	type decorator = server.Hook[metacontroller.DecoratorRequest, metacontroller.DecoratorResponse]
	return []server.Route{
		hookRoute("/v1/workspace/sync", ws.Sync, opts),
		hookRoute("/v1/workspace/finalize", ws.Finalize, opts),
		hookRoute("/v1/workspace/customize", ws.Customize, opts),
		hookRoute("/v1/datastore/sync", ds.Sync, opts),
		hookRoute("/v1/datastore/customize", ds.Customize, opts),
		hookRoute("/v1/resourceclaim/sync", rc.Sync, opts),
		hookRoute("/v1/resourceclaim/customize", rc.Customize, opts),
		hookRoute("/v1/nodes/sync", decorator(observe.NodeHealth(sink)), opts),
		hookRoute("/v1/pods/sync", decorator(observe.WorkspacePods(sink)), opts),
	}
}

// hookRoute routes POST path to hook h. The hook's name, which labels its
// metrics and log lines, is the path without /v1/: "workspace-sync".
func hookRoute[Req, Resp any](path string, h server.Hook[Req, Resp], opts []server.HandlerOption) server.Route {
	name := strings.ReplaceAll(strings.TrimPrefix(path, "/v1/"), "/", "-")
	return server.Route{Method: http.MethodPost, Path: path, Name: name, Handler: server.Handler(name, h, opts...)}
}
