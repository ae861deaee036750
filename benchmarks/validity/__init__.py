"""Whether what narbench reports holds: files, torch versions, the gate, metrics, datasets and significance."""
