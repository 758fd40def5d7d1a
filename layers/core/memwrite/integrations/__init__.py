"""memwrite inside agent frameworks, on `memwrite.client`; each module is its own extra:

- `langgraph`: `MemwriteStore`, a LangGraph `BaseStore` (`pip install "memwrite[langgraph]"`);
- `strands`: the Strands Agents tools `remember`, `recall`, `forget` (`memwrite[strands]`);
- `openai_agents`: the same tools for the OpenAI Agents SDK (`memwrite[openai-agents]`);
- `tools`: what the tool sets share, framework-free (`MemoryTools`, `remembered`).

Nothing is imported here: importing one integration never loads another framework.
"""
