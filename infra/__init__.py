"""Local infrastructure for development and tests: real Kafka and PostgreSQL.

``infra/kafka/pom.xml`` pins the broker; ``infra/compose.yaml`` offers the same
services to Docker users. Nothing here is used by the production processes.
"""
