CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, name TEXT, location TEXT, capacity INTEGER,
        highest INTEGER, lowest INTEGER, average INTEGER);
CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, song_name TEXT,
        song_release_year INTEGER, age INTEGER, is_male INTEGER);
CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, theme TEXT,
        stadium_id INTEGER REFERENCES stadium(stadium_id), year INTEGER);
CREATE TABLE singer_in_concert (concert_id INTEGER REFERENCES concert(concert_id),
        singer_id INTEGER REFERENCES singer(singer_id), PRIMARY KEY (concert_id, singer_id));
INSERT INTO stadium VALUES (1, 'Brechin City Park', 'Brechin City', 4000, 835, 525, 680);
INSERT INTO stadium VALUES (2, 'Alloa Athletic Park', 'Alloa Athletic', 4125, 3004, 1086, 2045);
INSERT INTO stadium VALUES (3, 'Peterhead Park', 'Peterhead', 4000, 2827, 1327, 2077);
INSERT INTO stadium VALUES (4, 'East Fife Park', 'East Fife', 11998, 3038, 581, 1809);
INSERT INTO stadium VALUES (5, 'Arbroath Park', 'Arbroath', 2000, 1591, 586, 1088);
INSERT INTO stadium VALUES (6, 'Stirling Albion Park', 'Stirling Albion', 3808, 3880, 1391, 2635);
INSERT INTO stadium VALUES (7, 'Raith Rovers Park', 'Raith Rovers', 4125, 3388, 977, 2182);
INSERT INTO singer VALUES (1, 'Dara Costa', 'United States', 'Stars', 2014, 20, 1);
INSERT INTO singer VALUES (2, 'Jun Novak', 'Netherlands', 'Gentleman', 2007, 33, 0);
INSERT INTO singer VALUES (3, 'Chen Patel', 'United States', 'Sun', 1998, 24, 1);
INSERT INTO singer VALUES (4, 'Uma Evans', 'Netherlands', 'Stars', 2016, 55, 0);
INSERT INTO singer VALUES (5, 'Viktor Novak', 'United States', 'Dangerous', 2001, 40, 0);
INSERT INTO singer VALUES (6, 'Quinn Kim', 'United States', 'Gentleman', 2008, 37, 1);
INSERT INTO singer VALUES (7, 'Ana Novak', 'France', 'Sun', 2014, 42, 0);
INSERT INTO singer VALUES (8, 'Lena Bauer', 'Japan', 'Dangerous', 2005, 23, 0);
INSERT INTO singer VALUES (9, 'Yara Lopez', 'United States', 'Dangerous', 1992, 51, 0);
INSERT INTO singer VALUES (10, 'Ben Patel', 'Netherlands', 'Moon', 2005, 45, 0);
INSERT INTO concert VALUES (1, 'Super bootcamp 1', 'Wide Awake', 2, 2016);
INSERT INTO concert VALUES (2, 'Auditions 2', 'Bleeding Love', 1, 2016);
INSERT INTO concert VALUES (3, 'Home Visits 3', 'Wide Awake', 3, 2014);
INSERT INTO concert VALUES (4, 'Super bootcamp 4', 'Happy Tonight', 1, 2016);
INSERT INTO concert VALUES (5, 'Home Visits 5', 'Wide Awake', 6, 2015);
INSERT INTO concert VALUES (6, 'Week 6', 'Free choice', 5, 2014);
INSERT INTO concert VALUES (7, 'Super bootcamp 7', 'Bleeding Love', 5, 2015);
INSERT INTO concert VALUES (8, 'Super bootcamp 8', 'Wide Awake', 1, 2016);
INSERT INTO singer_in_concert VALUES (1, 4);
INSERT INTO singer_in_concert VALUES (2, 9);
INSERT INTO singer_in_concert VALUES (3, 8);
INSERT INTO singer_in_concert VALUES (4, 5);
INSERT INTO singer_in_concert VALUES (4, 6);
INSERT INTO singer_in_concert VALUES (4, 8);
INSERT INTO singer_in_concert VALUES (6, 1);
INSERT INTO singer_in_concert VALUES (6, 3);
INSERT INTO singer_in_concert VALUES (6, 4);
INSERT INTO singer_in_concert VALUES (7, 1);
INSERT INTO singer_in_concert VALUES (7, 6);
INSERT INTO singer_in_concert VALUES (7, 9);
INSERT INTO singer_in_concert VALUES (8, 2);
INSERT INTO singer_in_concert VALUES (8, 4);
INSERT INTO singer_in_concert VALUES (8, 7);
