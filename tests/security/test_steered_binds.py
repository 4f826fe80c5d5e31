"""Attacks (issue 20 review) on host paths steered by sandbox code, each made for real by
sandbox code through the binaries.

--python and a venv that sandbox code could write: a venv in a project directory given as the
workspace is writable by the kernel of every session that has it. Its pyvenv.cfg `home` decides
which host tree the next session with `--python that-venv/bin/python` binds read-only at its own
path: rewritten to name ~/.ssh (or any directory), it would show that directory to the sandbox.
Only an interpreter's prefix (its standard library there) outside the trees sandboxes write may
be bound for it.

The SDK's CodeExecutor and images_dir inside the workspace (ipybox's layout: working_dir the
current directory, images_dir `images` in it): kernel code can make /app/images a symlink to
any host directory, and the SDK then wrote the image bytes the sandbox chose there. Below a tree
the kernel writes, images_dir is walked without following a symlink."""
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from ipybox_test import BUILD, IPYBOX, host_scratch, McpClient, require_sandbox  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk", "python"))
from ipybox_native import CodeExecutor  # noqa: E402

SYSTEM_PYTHON = "/usr/bin/python3"
SECRET = "r1-secret-3f9c1d"


class VenvHomeSteering(unittest.TestCase):
    """A fake home (0700) below the build directory (/tmp is a place of the sandbox's own)
    with a secret directory and a project whose venv (copies, so no symlink leads out of the
    workspace) is given to the sandbox as its workspace."""

    def setUp(self):
        require_sandbox(self)
        self.base = host_scratch("steered-pyenv-")
        self.addCleanup(shutil.rmtree, self.base, True)
        self.home = os.path.join(self.base, "home")
        os.mkdir(self.home, 0o700)
        self.secret_dir = os.path.join(self.home, "dotssh")
        os.mkdir(self.secret_dir, 0o700)
        with open(os.path.join(self.secret_dir, "id_ed25519"), "w") as f:
            f.write(SECRET + "\n")
        self.proj = os.path.join(self.home, "proj")
        os.mkdir(self.proj)
        self.venv = os.path.join(self.proj, ".venv")
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--copies", "--system-site-packages", "--without-pip",
                        self.venv], check=True, timeout=120)
        self.py = os.path.join(self.venv, "bin", "python")
        self.env = dict(os.environ, XDG_STATE_HOME=os.path.join(self.base, "state"))

    def run_ipybox(self, *args):
        return subprocess.run([IPYBOX, "run", *args], capture_output=True, text=True, timeout=120, env=self.env)

    def plant(self, script):
        """Session 1: the workspace's kernel-side code rewrites the venv."""
        r = self.run_ipybox("--workspace", self.proj, "--", "/bin/sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)

    def cfg(self):
        with open(os.path.join(self.venv, "pyvenv.cfg")) as f:
            return f.read()

    def test_venv_works_before_the_attack(self):
        """The same venv, untouched, runs (so the refusals below are the attack's)."""
        r = self.run_ipybox("--workspace", self.proj, "--python", self.py, "--", self.py, "-c",
                            "import sys; print(sys.prefix)")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), os.path.realpath(self.venv))

    def test_home_rewritten_to_a_secret_directory(self):
        self.plant("sed -i 's|^home = .*|home = %s|' /app/.venv/pyvenv.cfg" % self.secret_dir)
        self.assertIn("home = %s\n" % self.secret_dir, self.cfg())  # the sandbox could write it
        r = self.run_ipybox("--workspace", self.proj, "--python", self.py, "--", "/bin/sh", "-c",
                            "cat %s/id_ed25519" % self.secret_dir)
        self.assertNotIn(SECRET, r.stdout + r.stderr)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("names as its base interpreter's prefix %s, which holds no Python standard library"
                      % self.secret_dir, r.stderr)

    def test_home_rewritten_to_a_bin_below_a_secret_directory(self):
        """home = DIR/bin makes DIR the prefix: a bin/ planted there is not enough."""
        os.mkdir(os.path.join(self.secret_dir, "bin"))
        self.plant("sed -i 's|^home = .*|home = %s/bin|' /app/.venv/pyvenv.cfg" % self.secret_dir)
        r = self.run_ipybox("--workspace", self.proj, "--python", self.py, "--", "/bin/sh", "-c",
                            "cat %s/id_ed25519" % self.secret_dir)
        self.assertNotIn(SECRET, r.stdout + r.stderr)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("holds no Python standard library", r.stderr)

    def test_home_rewritten_to_a_fake_prefix_the_sandbox_made(self):
        """A prefix with a standard library's landmark, made by the sandbox in its workspace,
        would show that workspace to sessions that were not given it."""
        self.plant("mkdir -p /app/fake/bin /app/fake/lib/python3.11 && cp /usr/bin/python3 /app/fake/bin/python3 "
                   "&& : > /app/fake/lib/python3.11/os.py && sed -i 's|^home = .*|home = %s/fake/bin|' "
                   "/app/.venv/pyvenv.cfg" % self.proj)
        other = os.path.join(self.home, "other-ws")
        os.mkdir(other)
        r = self.run_ipybox("--workspace", other, "--python", self.py, "--", "/bin/ls", self.proj)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("which is in %s, a tree that sandboxes could write" % self.proj, r.stderr)

    def test_home_rewritten_through_download_file_into_an_allowed_dir(self):
        """The venv is not in a workspace but in an --allowed-dir: download_file (the model's,
        with bytes the kernel wrote) replaces its pyvenv.cfg."""
        cfg = self.cfg().replace("home = /usr/bin", "home = %s" % self.secret_dir)
        with McpClient("--allowed-dir", self.proj, env=self.env) as c:
            text, r = c.execute("open('/app/cfg', 'w').write(%r)" % cfg)
            self.assertFalse(r.get("isError"), text)
            r = c.call("download_file", {"relpath": "cfg", "local_path": os.path.join(self.venv, "pyvenv.cfg")})
            self.assertFalse(r.get("isError"), r)
        self.assertIn("home = %s\n" % self.secret_dir, self.cfg())
        r = self.run_ipybox("--python", self.py, "--", "/bin/sh", "-c", "cat %s/id_ed25519" % self.secret_dir)
        self.assertNotIn(SECRET, r.stdout + r.stderr)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("holds no Python standard library", r.stderr)


# A PNG's signature, then what the sandbox wants on the host.
PAYLOAD = b"\x89PNG\r\n\x1a\n#!/bin/sh\necho r1-pwned\n"
DISPLAY = ("from IPython.display import display, Image\n"
           "display(Image(data=%r))\n" % PAYLOAD)


class ImagesDirSymlink(unittest.TestCase):
    def setUp(self):
        require_sandbox(self)
        self.base = tempfile.mkdtemp(prefix="r1-images-", dir=os.path.realpath(BUILD))
        self.addCleanup(shutil.rmtree, self.base, True)
        self.ws = os.path.join(self.base, "ws")
        self.victim = os.path.join(self.base, "victim")
        os.mkdir(self.ws)
        os.mkdir(self.victim)
        env = {"IPYBOX_BIN": IPYBOX, "XDG_STATE_HOME": os.path.join(self.base, "state")}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        self.addCleanup(lambda: [os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
                                 for k, v in old.items()])

    def run_cells(self, *cells, images_dir="images"):
        """CodeExecutor(working_dir=ws, images_dir=images_dir relative to ws): each cell's
        result, or the exception it raised."""
        async def go():
            out = []
            cwd = os.getcwd()
            os.chdir(self.ws)
            try:
                async with CodeExecutor(working_dir=".", images_dir=images_dir) as ex:
                    for code in cells:
                        try:
                            out.append(await ex.execute(code, timeout=60))
                        except Exception as e:  # noqa: BLE001 (the refusal is the outcome)
                            out.append(e)
            finally:
                os.chdir(cwd)
            return out
        return asyncio.run(asyncio.wait_for(go(), 300))

    def test_images_written_in_the_workspace(self):
        """No attack: the image lands in ws/images (so the refusal below is the symlink's)."""
        (r,) = self.run_cells(DISPLAY)
        self.assertNotIsInstance(r, Exception, r)
        self.assertEqual(len(r.images), 1)
        with open(os.path.join(self.ws, str(r.images[0])), "rb") as f:
            self.assertEqual(f.read(), PAYLOAD)

    def test_images_symlink_planted_by_the_kernel_is_not_followed(self):
        plant = ("import os, shutil\n"
                 "shutil.rmtree('/app/images', ignore_errors=True)\n"
                 "os.symlink(%r, '/app/images')\n" % self.victim)
        r = self.run_cells(plant + DISPLAY)[0]
        self.assertEqual(os.listdir(self.victim), [])
        self.assertIsInstance(r, OSError)
        self.assertIn("which the kernel writes; it is not followed", str(r))

    def test_symlink_higher_up_in_the_workspace(self):
        plant = "import os\nos.symlink(%r, '/app/out')\n" % self.victim
        r = self.run_cells(plant + DISPLAY, images_dir="out/plots")[0]
        self.assertEqual(os.listdir(self.victim), [])
        self.assertIsInstance(r, OSError)


if __name__ == "__main__":
    unittest.main()
