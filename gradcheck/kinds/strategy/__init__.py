"""The strategy kind: f's batch split over MirroredStrategy replicas or MultiWorkerMirroredStrategy
workers, the summed gradient against the single-device one (--strategy mirrored:N|multiworker:N)."""
