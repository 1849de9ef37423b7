# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

import setuptools

# The simulator's event loop is C: a pure-Python loop is some hundred
# times too slow for the evaluation grids (doc/source/sim-calibration.rst).
SIM_CORE = setuptools.Extension(
    'ufo_sim.engine._core',
    sources=['ufo_sim/engine/_core.c'],
    extra_compile_args=['-std=c99', '-O2', '-Wall'],
    libraries=['m'])

setuptools.setup(
    setup_requires=['pbr>=6.0.0'],
    ext_modules=[SIM_CORE],
    pbr=True)
