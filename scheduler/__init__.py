"""Scheduler: publishes each due fire of each schedule to RabbitMQ."""
