"""`voxlog chaos`: a bounded fault campaign against voxlog's own processes on a local Kafka and PostgreSQL."""
