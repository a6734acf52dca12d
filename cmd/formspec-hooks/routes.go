package main

import (
	"net/http"

	"github.com/formspec/formspec-hooks/hooks/datastore"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/hooks/observe"
	"github.com/formspec/formspec-hooks/hooks/reporter/observation"
	"github.com/formspec/formspec-hooks/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/hooks/server"
	"github.com/formspec/formspec-hooks/hooks/workspace"
)

// hookRoutes is the hook server's route table (SPEC §5), one entry per hook.
// Paths follow fixtures/<controller>/<hook>/, so any fixture can be posted
// to the path its directory names.
func hookRoutes(cfg hookConfig) []server.Route {
	wsCfg := workspace.Config{
		ResourceImage:     cfg.resourceImage,
		DefaultVersion:    cfg.defaultVersion,
		ControlClusterURL: cfg.controlClusterURL,
	}
	// A nil *handoff.Client must not become a non-nil interface.
	var sink observe.Sink = discard{}
	if cfg.reports != nil {
		wsCfg.Directives, wsCfg.Reports, sink = cfg.reports, cfg.reports, cfg.reports
	}
	ws := workspace.New(wsCfg)
	ds := datastore.New(datastore.Options{Logger: cfg.logger, Decisions: cfg.decisions})
	rc := resourceclaim.New(resourceclaim.Options{Logger: cfg.logger, Decisions: cfg.decisions})
	opts := cfg.handlerOptions
	return []server.Route{
		route("/v1/workspace/sync", "workspace-sync", server.Handler("workspace-sync", ws.Sync, opts...)),
		route("/v1/workspace/finalize", "workspace-finalize", server.Handler("workspace-finalize", ws.Finalize, opts...)),
		route("/v1/workspace/customize", "workspace-customize", server.Handler("workspace-customize", ws.Customize, opts...)),
		route("/v1/datastore/sync", "datastore-sync", server.Handler("datastore-sync", ds.Sync, opts...)),
		route("/v1/datastore/customize", "datastore-customize", server.Handler("datastore-customize", ds.Customize, opts...)),
		route("/v1/resourceclaim/sync", "resourceclaim-sync", server.Handler("resourceclaim-sync", rc.Sync, opts...)),
		route("/v1/resourceclaim/customize", "resourceclaim-customize", server.Handler("resourceclaim-customize", rc.Customize, opts...)),
		route("/v1/nodes/sync", "nodes-sync", server.Handler("nodes-sync", server.Hook[metacontroller.DecoratorRequest, metacontroller.DecoratorResponse](observe.NodeHealth(sink)), opts...)),
		route("/v1/pods/sync", "pods-sync", server.Handler("pods-sync", server.Hook[metacontroller.DecoratorRequest, metacontroller.DecoratorResponse](observe.WorkspacePods(sink)), opts...)),
	}
}

// discard is the observation sink when no reporter is configured.
type discard struct{}

func (discard) Send(observation.Observation) {}

func route(path, name string, h http.Handler) server.Route {
	return server.Route{Method: http.MethodPost, Path: path, Name: name, Handler: h}
}
