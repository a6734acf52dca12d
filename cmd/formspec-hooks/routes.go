package main

import "github.com/formspec/formspec-hooks/hooks/server"

// hookRoutes is the hook server's route table (SPEC §5), one entry per hook,
// each built with server.Handler(name, hook, cfg.handlerOptions...).
func hookRoutes(cfg hookConfig) []server.Route {
	// Routes are added as each hook lands.
	return []server.Route{}
}
