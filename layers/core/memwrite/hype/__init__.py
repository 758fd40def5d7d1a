"""Stage 7, hype: index a changed memory (text, then vectors of its content and questions)."""
