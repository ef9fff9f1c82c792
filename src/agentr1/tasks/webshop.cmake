# agentr1_webshop: the "webshop" task family (webshop*.h/.cpp), on agentr1_tasks_core.
agentr1_library(webshop
  SOURCES
    webshop_catalog.cpp
    webshop_family.cpp
    webshop_game.cpp
    webshop_goal.cpp
    webshop_reward.cpp
    webshop_vocab.cpp
  DEPS agentr1_tasks_core agentr1_env agentr1_core)
agentr1_test(tasks_webshop_test SOURCES webshop_test.cpp DEPS agentr1_webshop LABEL unit)
