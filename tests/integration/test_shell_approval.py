"""Shell-command approval (`ipybox mcp --approve-shell`, embedded supervisor): every form of
shell command in the kernel (!cmd, !!cmd, %sx, %system, getoutput, %%bash, %%sh, %%script) is
put to the MCP client as server "ipybox", tool "shell" or "shell_magic", {"cmd": ...} after
{var} expansion, before it runs; declined, it does not run; --approve-tools ipybox/... patterns
pre-approve (and only those naming "ipybox"); --require-shell-escape turns the Python-level
ways around it into RuntimeError with ipybox's messages."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'lib'))
from ipybox_test import ACCEPT, DECLINE, ELICIT, McpCase, McpClient, text_of  # noqa: E402
import mcp_servers  # noqa: E402


# (form, code running `touch PATH` with {x} in it, tool asked)
FORMS = [
    ("!cmd", "!touch {path}", "shell"),
    ("!!cmd", "!!touch {path}", "shell"),
    ("%sx", "%sx touch {path}", "shell"),
    ("%system", "%system touch {path}", "shell"),
    ("getoutput", "get_ipython().getoutput('touch {path}')", "shell"),
    ("%%bash", "%%bash\ntouch /app/{name}\n", "shell_magic"),
    ("%%sh", "%%sh\ntouch /app/{name}\n", "shell_magic"),
    ("%%script", "%%script bash\ntouch /app/{name}\n", "shell_magic"),
]


def toolcall(params):
    return params["_meta"]["ipybox/toolCall"]


class ShellCase(McpCase):
    def exists(self, c, name):
        text, r = c.execute("import os; print('EXISTS', os.path.exists('/app/%s'))" % name)
        self.assertFalse(r.get("isError"), text)
        return "EXISTS True" in text

    def form_code(self, code, name):
        # {path} is expanded by IPython from the kernel's variable; the magics' cells are not
        # expanded (IPython expands only their line), so their name is written out.
        return "path = '/app/%s'\n%s" % (name, code) if "{path}" in code else code.format(name=name)


class TestApproval(ShellCase):
    def test_every_form_is_asked_with_the_expanded_command_and_runs_once_accepted(self):
        c = self.client("--approve-shell", capabilities=ELICIT)
        for i, (form, code, tool) in enumerate(FORMS):
            with self.subTest(form=form):
                name = "accepted-%d" % i
                r, asked = c.call_answering("execute_ipython_cell", {"code": self.form_code(code, name)},
                                            lambda p: ACCEPT)
                self.assertFalse(r.get("isError"), text_of(r))
                self.assertEqual(len(asked), 1, asked)
                call = toolcall(asked[0])
                self.assertEqual((call["server"], call["tool"]), ("ipybox", tool))
                self.assertEqual(list(call["arguments"]), ["cmd"])
                cmd = call["arguments"]["cmd"]
                if tool == "shell":
                    self.assertEqual(cmd, "touch /app/%s" % name)  # {path} filled in
                elif form == "%%script":
                    self.assertEqual(cmd, "%%%%script bash\ntouch /app/%s\n" % name)
                else:
                    self.assertEqual(cmd.strip(), "touch /app/%s" % name)  # ipybox's shape: the cell
                self.assertIn("asks to run the shell command", asked[0]["message"])
                self.assertIn("touch /app/%s" % name, asked[0]["message"])
                self.assertTrue(self.exists(c, name), form)

    def test_a_declined_command_does_not_run_and_the_cell_says_why(self):
        c = self.client("--approve-shell", capabilities=ELICIT)
        for i, (form, code, tool) in enumerate(FORMS):
            with self.subTest(form=form):
                name = "declined-%d" % i
                r, asked = c.call_answering("execute_ipython_cell", {"code": self.form_code(code, name) +
                                            ("" if tool == "shell_magic" else "\nprint('NOT' + ' REACHED')")},
                                            lambda p: DECLINE)
                self.assertEqual(len(asked), 1)
                self.assertTrue(r.get("isError"), text_of(r))
                text = text_of(r)
                self.assertIn("ShellCommandRejected", text)
                self.assertIn("Rejected: the shell command", text)
                self.assertIn("the application declined it", text)
                self.assertNotIn("NOT REACHED", text)
                self.assertFalse(self.exists(c, name), form)
        # The rejection is a mcptools.ToolRejected, so code can catch it.
        r, _ = c.call_answering("execute_ipython_cell", {"code": (
            "import mcptools\ntry:\n    !true\nexcept mcptools.ToolRejected as e:\n"
            "    print('CAUGHT', e.server, e.tool, e.kind)\n")}, lambda p: DECLINE)
        self.assertIn("CAUGHT ipybox shell rejected", text_of(r))

    def test_variables_are_expanded_before_asking(self):
        c = self.client("--approve-shell", capabilities=ELICIT)
        code = ("who = 'world'\nn = 3\n!echo hello {who} $n {n*2}\n"
                "def f():\n    local = 'inner'\n    !echo {local}\nf()\n"
                "!echo {who} {undefined_name}\n")
        r, asked = c.call_answering("execute_ipython_cell", {"code": code}, lambda p: ACCEPT)
        self.assertFalse(r.get("isError"), text_of(r))
        cmds = [toolcall(a)["arguments"]["cmd"] for a in asked]
        # What is asked is what IPython runs: its own expansion ({expr}, $name, a function's
        # locals); with a name it cannot fill, IPython expands nothing of the command.
        self.assertEqual(cmds, ["echo hello world 3 6", "echo inner", "echo {who} {undefined_name}"])
        self.assertIn("hello world 3 6", text_of(r))
        self.assertIn("inner", text_of(r))

    def test_the_question_is_withdrawn_when_the_cell_is_cancelled(self):
        c = self.client("--approve-shell", capabilities=ELICIT)
        rid = c.send_request("tools/call", {"name": "execute_ipython_cell",
                                            "arguments": {"code": "!touch /app/withdrawn"}})
        while True:
            msg = c.read_message(60)
            if msg.get("method") == "elicitation/create":
                ask_id = msg["id"]
                break
        c.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
        while True:
            msg = c.read_message(60)
            if msg.get("method") == "notifications/cancelled":
                self.assertEqual(msg["params"]["requestId"], ask_id)
                break
        c.send({"jsonrpc": "2.0", "id": ask_id, "result": ACCEPT})  # too late: changes nothing
        self.assertFalse(self.exists(c, "withdrawn"))


class TestPolicy(ShellCase):
    def test_approve_tools_naming_ipybox_pre_approves_and_nothing_else_does(self):
        c = self.client("--approve-shell", "--approve-tools", "ipybox/shell", "--approve-tools", "*")
        text, r = c.execute("!touch /app/pre\nprint('RAN')")
        self.assertFalse(r.get("isError"), text)
        self.assertIn("RAN", text)
        self.assertTrue(self.exists(c, "pre"))
        # shell_magic is not named, '*' does not count for shell commands, and this client
        # cannot be asked: refused, with the reason.
        text, r = c.execute("%%bash\ntouch /app/magic\n")
        self.assertTrue(r.get("isError"), text)
        self.assertIn("ShellCommandRejected", text)
        self.assertIn("elicitation", text)
        self.assertIn("ipybox/shell_magic", text)
        self.assertFalse(self.exists(c, "magic"))
        # A fresh kernel (reset) has the hooks again: they come from its launcher's argv.
        r = c.call("reset")
        self.assertFalse(r.get("isError"), r)
        text, r = c.execute("%%sh\ntouch /app/magic\n")
        self.assertIn("ShellCommandRejected", text)
        self.assertFalse(self.exists(c, "magic"))

    def test_server_glob_alone_does_not_approve_shell_commands(self):
        c = self.client("--approve-shell", "--approve-tools", "*/shell", "--approve-tools", "ipy*")
        text, r = c.execute("!touch /app/glob")
        self.assertTrue(r.get("isError"), text)
        self.assertFalse(self.exists(c, "glob"))
        c2 = self.client("--approve-shell", "--approve-tools", "ipybox")
        text, r = c2.execute("!echo one\n%sx echo two")
        self.assertFalse(r.get("isError"), text)

    def test_without_the_option_nothing_is_asked(self):
        c = self.client(capabilities=ELICIT)
        r, asked = c.call_answering("execute_ipython_cell", {"code": "!echo plain"}, lambda p: DECLINE)
        self.assertFalse(r.get("isError"), text_of(r))
        self.assertEqual(asked, [])
        self.assertIn("plain", text_of(r))

    def test_a_real_server_cannot_take_the_name_ipybox(self):
        c = self.client("--approve-shell")
        r = c.call("register_mcp_server", {"server_name": "ipybox",
                                           "server_params": mcp_servers.everything_stdio_params()})
        self.assertTrue(r.get("isError"), r)
        self.assertIn("belongs to the server built into ipybox", text_of(r))
        self.assertIn("--approve-shell", text_of(r))

    def test_require_shell_escape_needs_approve_shell(self):
        c = McpClient("--require-shell-escape", initialize=False)
        c.proc.stdin.close()
        try:
            self.assertNotEqual(c.proc.wait(60), 0)
            self.assertIn("--require-shell-escape needs --approve-shell", c.proc.stderr.read().decode())
        finally:
            c.close()


class TestRequireShellEscape(ShellCase):
    BLOCKED = [
        ("import subprocess; subprocess.run(['touch', '/app/esc'])", "Direct subprocess calls are not allowed"),
        ("import subprocess; subprocess.Popen(['touch', '/app/esc']).wait()",
         "Direct subprocess calls are not allowed"),
        ("import subprocess; subprocess.check_output('touch /app/esc', shell=True)",
         "Direct subprocess calls are not allowed"),
        ("import os; os.popen('touch /app/esc').read()", "Direct subprocess calls are not allowed"),
        ("import os; os.system('touch /app/esc')", "Direct os.system() calls are not allowed"),
        ("import os; os.execvp('touch', ['touch', '/app/esc'])", "Direct os.execvp() calls are not allowed"),
        ("import os; os.spawnlp(os.P_WAIT, 'touch', 'touch', '/app/esc')",
         "Direct os.spawnlp() calls are not allowed"),
        ("import os; os.posix_spawnp('touch', ['touch', '/app/esc'], {})",
         "Direct os.posix_spawnp() calls are not allowed"),
        ("import pty; pty.spawn(['touch', '/app/esc'])", "Direct pty.spawn() calls are not allowed"),
        ("import asyncio\np = await asyncio.create_subprocess_exec('touch', '/app/esc')\nawait p.wait()",
         "Direct subprocess calls are not allowed"),
    ]

    def test_python_level_process_creation_is_refused_and_approved_commands_still_run(self):
        c = self.client("--approve-shell", "--require-shell-escape", "--approve-tools", "ipybox")
        for code, message in self.BLOCKED:
            with self.subTest(code=code):
                text, r = c.execute(code)
                self.assertTrue(r.get("isError"), text)
                self.assertIn("RuntimeError", text)
                self.assertIn(message + ". Use ! syntax.", text)
                self.assertFalse(self.exists(c, "esc"))
        # The approved forms work, their own processes included (pexpect's exec, getoutput's
        # Popen, the script magic's process started on another thread).
        text, r = c.execute("x = 'ok'\n!echo bang-{x}\nr = !echo twice\nprint(r)\ns = %sx echo sx\nprint(s)")
        self.assertFalse(r.get("isError"), text)
        for word in ("bang-ok", "twice", "sx"):
            self.assertIn(word, text)
        text, r = c.execute("%%bash\necho from-bash\n")
        self.assertFalse(r.get("isError"), text)
        self.assertIn("from-bash", text)
        # ... and nothing stays permitted after them.
        text, r = c.execute("import subprocess; subprocess.run(['true'])")
        self.assertIn("Direct subprocess calls are not allowed", text)

    def test_without_the_escape_guard_subprocess_is_not_touched(self):
        c = self.client("--approve-shell")
        text, r = c.execute("import subprocess; print(subprocess.run(['echo', 'direct'], capture_output=True)"
                            ".stdout.decode())")
        self.assertFalse(r.get("isError"), text)
        self.assertIn("direct", text)


if __name__ == "__main__":
    unittest.main()
