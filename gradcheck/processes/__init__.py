"""Worker processes: the supervisor that runs checks in them, the workers, the messages
between the two, what a failed worker means, and process trees as the system shows them."""
