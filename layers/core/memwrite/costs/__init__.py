"""What model calls cost: the usage record each call yields and the prices it is charged at."""
