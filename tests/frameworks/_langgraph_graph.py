"""What the LangGraph test agents share: the stand-in's chat model bound to their tools, and
the plain tool loop (a model node and a ``ToolNode``, until the model asks for no tool)."""

from __future__ import annotations

import os
from typing import Any

from langchain_core.messages import AnyMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


def chat_model(tools: list[Any]) -> Any:
    """``gpt-4o-mini`` at the stand-in (``STANDIN_URL``), with ``tools`` bound."""
    base = os.environ.get("STANDIN_URL", "http://127.0.0.1:8765").rstrip("/")
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=f"{base}/v1", api_key="sk-standin-not-a-secret"
    ).bind_tools(tools)


def tool_loop(tools: list[Any], checkpointer: Any = None) -> Any:
    """The compiled graph: ``agent`` (the model) then ``tools`` while the model asks."""
    model = chat_model(tools)

    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)
