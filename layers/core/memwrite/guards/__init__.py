"""Guards on what tenants supply: patterns run in linear time, webhooks go outward only."""
