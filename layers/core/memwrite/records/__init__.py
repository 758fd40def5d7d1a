"""What is stored: memories, entity_facts rows, episodes, commits, snapshots, change events."""
