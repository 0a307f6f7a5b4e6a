#!/usr/bin/env python3
"""The calculator environment of rl-env(7), as rlrun's built-in one plays it.

An episode is a sum "A+B". A model message (whitespace-trimmed) that begins
with a digit is the final answer: the reward is the fraction of the expected
answer's characters it has in place, over the longer of the two (1.0 only
for the exact answer), and the episode is done. One that begins with "="
answers with what the calculator's display shows (its last result; nothing
before a call, which scores 0), and the episode is done. Any other message
(a "c", say) calls the calculator: the display and the observation are the
sum, reward 0.

Every answer depends only on the episode's start and its transcript: a
start that carries a history replays the history's messages to rebuild the
display, without answering them.
"""
import json
import sys


def score(response, answer):
    """rlrun's rule for the built-in tasks: characters in place / longer."""
    response = response.strip()
    right = sum(1 for a, b in zip(response, answer) if a == b)
    longer = max(len(response), len(answer))
    return right / longer if longer else 1.0


def tool(problem, expected):
    """The calculator: the sum of "A+B", or the expected answer if the
    problem is not written that way."""
    try:
        a, b = (problem or "").split("+")
        return str(int(a) + int(b))
    except ValueError:
        return expected


def judge(episode, message):
    """(observation, reward, done) for one model message; the display is
    the episode's state."""
    message = message.strip()
    if message[:1].isdigit():
        return "", score(message, episode["expected_answer"]), True
    if message.startswith("="):
        shown = episode["shown"]
        return "", score(shown, episode["expected_answer"]) if shown else 0.0, True
    episode["shown"] = tool(episode["problem"], episode["expected_answer"])
    return episode["shown"], 0.0, False


def main():
    episodes = {}  # id -> the start's fields
    for number, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
            kind, eid = msg["type"], msg["episode"]
            if kind == "start":
                episodes[eid] = {"problem": msg.get("problem"), "shown": "",
                                 "expected_answer": str(msg["expected_answer"])}
                for turn in msg.get("history") or []:
                    judge(episodes[eid], turn["message"])  # already answered
                continue
            if kind == "end":
                episodes.pop(eid, None)
                continue
            observation, reward, done = judge(episodes[eid], msg["message"])
        except (ValueError, KeyError, TypeError) as e:
            sys.exit(f"calculator.py: stdin line {number}: bad message: {e!r}")
        if done:
            del episodes[eid]
        print(json.dumps({"episode": eid, "observation": observation,
                          "reward": reward, "done": done}), flush=True)


if __name__ == "__main__":
    main()
