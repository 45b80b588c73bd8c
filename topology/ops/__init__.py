"""Operations below every surface: each decides and acts once, with its own result and error
types, and the command (and later the HTTP API and the client) only parses, calls and
renders. Nothing here parses a command line, serves HTTP or renders a template."""
