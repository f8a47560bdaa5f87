"""HTTP routes: thin layers that parse, call the gateway, and shape responses."""

from elicitation_gateway.server.routes import elicitations, health, page, questions, streams

routes = [*elicitations.routes, *questions.routes, *streams.routes, *health.routes, *page.routes]
