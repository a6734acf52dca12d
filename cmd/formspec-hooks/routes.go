package main

import (
	"net/http"

	"github.com/formspec/formspec-hooks/hooks/server"
	"github.com/formspec/formspec-hooks/hooks/workspace"
)

// hookRoutes is the hook server's route table (SPEC §5), one entry per hook.
// Paths follow fixtures/<controller>/<hook>/, so any fixture can be posted
// to the path its directory names.
func hookRoutes(cfg hookConfig) []server.Route {
	ws := workspace.New(workspace.Config{
		ResourceImage:     cfg.resourceImage,
		DefaultVersion:    cfg.defaultVersion,
		ControlClusterURL: cfg.controlClusterURL,
	})
	opts := cfg.handlerOptions
	return []server.Route{
		route("/v1/workspace/sync", "workspace-sync", server.Handler("workspace-sync", ws.Sync, opts...)),
		route("/v1/workspace/finalize", "workspace-finalize", server.Handler("workspace-finalize", ws.Finalize, opts...)),
		route("/v1/workspace/customize", "workspace-customize", server.Handler("workspace-customize", ws.Customize, opts...)),
	}
}

func route(path, name string, h http.Handler) server.Route {
	return server.Route{Method: http.MethodPost, Path: path, Name: name, Handler: h}
}
