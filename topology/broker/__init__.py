"""Talking to RabbitMQ: connections, reading queues without taking anything out, and aiormq."""
