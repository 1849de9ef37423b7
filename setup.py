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

# No C extension here: the simulator's C core (ufo_sim/engine/_core.c,
# shipped as package data) is compiled on first use, where the simulator
# runs (ufo_sim/engine/build.py), so that no install needs a compiler.
setuptools.setup(
    setup_requires=['pbr>=6.0.0'],
    pbr=True)
