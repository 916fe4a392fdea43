"""What agents talk to: the model endpoints (the real API through a forwarding proxy, the stub) behind one registry."""
