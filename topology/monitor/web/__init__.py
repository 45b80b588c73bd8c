"""What the dashboard's pages and the HTTP API share on the web: the application with its
security headers and static files, the login and its throttle, the templates, and the
dashboard each request is served by."""
