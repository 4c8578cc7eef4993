"""The ground floor every app stands on: actors, errors, events, auth, web
helpers, API types, batching, rights, channel-layer sends, the agents package
(constellations, agents, tokens, presence) and ``db`` (the database engine
and every raw SQL statement).  Nothing here imports an app above it."""
