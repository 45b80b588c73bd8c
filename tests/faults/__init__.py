"""Fault tests: a private RabbitMQ node and worker processes broken on purpose."""
