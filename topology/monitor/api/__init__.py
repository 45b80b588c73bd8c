"""The HTTP API under ``/api/v1/``, served with the dashboard: JSON, bearer tokens with roles,
and an OpenAPI document made from the same route table."""
