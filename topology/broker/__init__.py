"""Talking to RabbitMQ: connections, and reading queues without taking anything out."""
